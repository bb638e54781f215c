// cohort under a real Slurm (slurm-wlm 22.05: slurmctld, several slurmd on this machine, munged):
// Slurm's own hostlist code as the reference for cohort's, the job scripts of scripts/slurm/
// training examples/python/train_ddp.py, signals from scancel reaching the workers, a node lost
// from an elastic job, and a preempted job that resumes from its checkpoint after a requeue.
// Needs root (network namespace, bind mount) and Slurm: without them each test fails, saying so;
// but for the steps run with a Slurm step's variables only (a derived port another job holds).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <csignal>
#include <regex>
#include <thread>

#include "launcher/slurm/hostlist.hpp"
#include "launcher/slurm/slurm_env.hpp"
#include "tests/integration/slurm_support.hpp"

using namespace cohort::test;

namespace {

void require_slurm() {
  require_prerequisite(slurm_installed(),
                       kSlurmctld + " (scripts/setup installs slurm-wlm and munge)");
  require_prerequisite(::geteuid() == 0,
                       "root, for the test's Slurm cluster (network namespace, bind mount)");
}

std::string script(const std::string& name) {
  return std::string(kSourceDir) + "/scripts/slurm/" + name;
}

const std::string kTrain = std::string(kSourceDir) + "/examples/python/train_ddp.py";

/// Environment of a job that runs a script of scripts/slurm/ on the example.
std::map<std::string, std::string> example_env() { return {{"TRAIN", kTrain}}; }

/// sbatch options that fit the test cluster (4 CPUs and 2 fake GPUs per node) and bound the job.
std::vector<std::string> fit(int nodes, const std::vector<std::string>& more = {}) {
  std::vector<std::string> args{"--nodes=" + std::to_string(nodes), "--gpus-per-node=2",
                                "--cpus-per-task=2", "--time=4"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// A short training run on CPU.
const std::vector<std::string> kShortTraining{"--epochs",    "2", "--steps-per-epoch", "10",
                                              "--log-every", "5", "--device",          "cpu"};

/// The output file of a job whose script sets --output=%x-%j.out.
std::string job_output(const Scratch& scratch, const std::string& name, const std::string& id) {
  return read_file(scratch.file(name + "-" + id + ".out"));
}

/// Steps logged by rank 0 (--step-log): "round step loss world_size" per line.
struct StepLine {
  int round = 0, step = 0, world_size = 0;
};
std::vector<StepLine> step_log(const std::string& path) {
  std::vector<StepLine> steps;
  for (const auto& line : split_lines(read_file(path))) {
    std::istringstream in(line);
    StepLine entry;
    double loss = 0;
    if (in >> entry.round >> entry.step >> loss >> entry.world_size) steps.push_back(entry);
  }
  return steps;
}
int last_step(const std::string& path) {
  auto steps = step_log(path);
  return steps.empty() ? -1 : steps.back().step;
}

/// The step numbers after "resumed from ... at step N" lines of the example.
std::vector<int> resumed_steps(const std::string& output) {
  std::vector<int> steps;
  std::regex resumed("resumed from \\S+ at step (\\d+)");
  for (std::sregex_iterator it(output.begin(), output.end(), resumed), end; it != end; ++it) {
    steps.push_back(std::stoi((*it)[1]));
  }
  return steps;
}

/// Waits until rank 0 logged step `step` (false at once if the job ended before).
bool training_reached(const SlurmCluster& cluster, const std::string& job, const std::string& log,
                      int step) {
  poll_until([&] { return last_step(log) >= step || !cluster.job_active(job); }, 120s);
  return last_step(log) >= step;
}

}  // namespace

TEST_CASE("Slurm's scontrol expands and compresses hostlists as cohort does",
          "[integration][slurm][hostlist]") {
  require_slurm();
  Scratch scratch;
  std::ofstream(scratch.file("slurm.conf")) << "ClusterName=hostlists\nSlurmctldHost=localhost\n";
  ChildOptions options = scratch.options({{"SLURM_CONF", scratch.file("slurm.conf")}});
  options.name = "scontrol";
  auto scontrol = [&](const std::string& what, const std::string& arg) {
    RunResult result = run_to_end({"/usr/bin/scontrol", "show", what, arg}, options, 20s);
    INFO("scontrol show " << what << " " << arg << ": " << result.err);
    REQUIRE(result.status.success());
    return result.out;
  };
  for (const std::string expression :
       {"gpu-[01-04,07],login1", "node[9-11]", "a[1,3],b[08-10]", "a[098-101]", "n[9-10]",
        "rack[1-2]-n[01-02]", "x[1-2]y[3-4]", "h[7,010-012]", "c[1-2]-[3-4]", "gpu[0-1],gpu[3]",
        "login", "node1,node2,node3", "node[3,1-2]", "gpu-[001-003],cpu-[9-10]"}) {
    INFO(expression);
    auto ours = cohort::expand_hostlist(expression);
    REQUIRE(ours);
    CHECK(*ours == split_lines(scontrol("hostnames", expression)));
  }
  using Hosts = std::vector<std::string>;
  for (const Hosts& hosts :
       {Hosts{"node1", "node2", "node3"}, Hosts{"gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07"},
        Hosts{"n8", "n9", "n10"}, Hosts{"a098", "a099", "a100"}, Hosts{"solo"},
        Hosts{"c1", "c2", "c3", "c5"}, Hosts{"node3", "node1", "node2"}, Hosts{"b2", "a1", "a2"},
        Hosts{"gpu-01", "gpu-02", "login1"}}) {
    std::string joined;
    for (const auto& host : hosts) joined += (joined.empty() ? "" : ",") + host;
    std::string ours = cohort::compress_hostlist(hosts);
    INFO(joined << " -> " << ours);
    CHECK(ours + "\n" == scontrol("hostlist", joined));
    CHECK(split_lines(scontrol("hostnames", ours)) == hosts);  // Slurm reads ours back
  }
}

namespace {

/// True when nothing listens on 127.0.0.1:`port` (this network namespace).
bool loopback_port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return free;
}

/// The environment of a one-node step of job `job` on this machine (no Slurm needed).
std::map<std::string, std::string> one_node_step(uint64_t job, const Scratch& scratch) {
  return {{"SLURM_JOB_ID", std::to_string(job)},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NUM_NODES", "1"},
          {"SLURM_STEP_NODELIST", "localhost"},
          {"SLURM_NODEID", "0"},
          {"SLURM_GPUS_ON_NODE", "1"},
          {"HOME", scratch.path()}};  // the job tokens' secret, ~/.cohort/secret
}

}  // namespace

// Two jobs sharing a node whose steps got one rendezvous port (job ids 1000 apart did, always):
// the second's agent finds the port taken and the first's rendezvous refuses its job's token.
TEST_CASE("a Slurm step refused at its derived port by another job's rendezvous says so",
          "[integration][slurm]") {
  Scratch scratch;
  uint64_t first = 1042;
  while (!loopback_port_free(cohort::slurm_rendezvous_port(first, 0))) ++first;
  int port = cohort::slurm_rendezvous_port(first, 0);
  uint64_t second = first + 1;
  while (cohort::slurm_rendezvous_port(second, 0) != port) ++second;
  auto running = scratch.start({"--no-python", kTestWorkerBin, "--ready-file", "ready", "--hang"},
                               one_node_step(first, scratch));
  REQUIRE(wait_until([&] { return file_exists(scratch.file("ready")); }, 30s));
  RunResult refused =
      scratch.run({"--no-python", kTestWorkerBin}, one_node_step(second, scratch), 30s);
  INFO(refused.err);
  CHECK(refused.status.shell_code() == 3);
  CHECK(contains(refused.err, "authentication failed"));
  CHECK(contains(refused.err, "localhost:" + std::to_string(port) +
                                  " is the endpoint cohort derived from the Slurm job and step: "
                                  "another job or step likely holds that port; give this step "
                                  "its own with --rdzv-endpoint HOST:PORT"));
  running->signal(SIGTERM);
  CHECK(running->wait(30s));
  CHECK(scratch.nothing_left());
}

TEST_CASE("one-node.sbatch trains the PyTorch example with one worker per GPU",
          "[integration][slurm]") {
  require_slurm();
  require_torch();
  Scratch scratch;
  SlurmCluster cluster(scratch, 1);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  std::string job = cluster.submit(
      concat(concat(fit(1), {script("one-node.sbatch")}), kShortTraining), example_env());
  std::string state = cluster.wait_for_end(job, 120s);
  std::string output = job_output(scratch, "cohort-one-node", job);
  INFO(output << cluster.job(job));
  CHECK(state == "COMPLETED");
  CHECK(cluster.job_field(job, "ExitCode") == "0:0");
  CHECK(contains(output, "[default0]:round 0: world size 2, starting from scratch"));
  CHECK(contains(output, "[default0]:done: 20 steps, final loss "));
  CHECK(file_exists(scratch.file("checkpoints/" + job + "/checkpoint.pt")));
  cluster.stop();
  CHECK(scratch.nothing_left());
}

TEST_CASE("multi-node.sbatch: one cohort run per node, the rendezvous on the first node",
          "[integration][slurm]") {
  require_slurm();
  require_torch();
  Scratch scratch;
  SlurmCluster cluster(scratch, 3);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  // node[2-3]: the rendezvous host is node2, not simply the cluster's first node.
  std::string job = cluster.submit(
      concat(concat(fit(2, {"--exclude=node1"}), {script("multi-node.sbatch")}), kShortTraining),
      example_env());
  std::string state = cluster.wait_for_end(job, 120s);
  std::string output = job_output(scratch, "cohort-multi-node", job);
  INFO(output << cluster.job(job));
  CHECK(cluster.job_field(job, "NodeList") == "node[2-3]");
  CHECK(state == "COMPLETED");
  CHECK(cluster.job_field(job, "ExitCode") == "0:0");
  CHECK(contains(output, "[default0]:round 0: world size 4, starting from scratch"));
  CHECK(contains(output, "[default0]:done: 20 steps, final loss "));
  cluster.stop();
  CHECK(scratch.nothing_left());
}

namespace {

/// The batch script's `cohort launch` process of job `job` (0 if there is none).
pid_t launch_process(const std::string& job) {
  for (pid_t pid : processes_with("SLURM_JOB_ID=" + job)) {
    std::vector<std::string> argv = proc_fields(pid, "cmdline");
    if (argv.size() >= 2 && argv[0] == kCohortBin && argv[1] == "launch") return pid;
  }
  return 0;
}

}  // namespace

// The cluster has no sshd: each host's agent can only have started as a step of the job.
TEST_CASE("cohort launch in a Slurm job starts each node's agent as a job step, without ssh",
          "[integration][slurm][launch]") {
  require_slurm();
  Scratch scratch;
  SlurmCluster cluster(scratch, 2);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  const std::string worker = "--no-python " + std::string(kTestWorkerBin) +
                             " --dump-env env_{RANK}.json --ready-file ready_{RANK}";
  write_script(scratch.file("launch.sbatch"), "exec \"$COHORT\" launch -v " + worker + " \"$@\"\n");
  // --launcher-args split as a shell splits them: srun gets one word with a blank inside.
  write_script(scratch.file("launch-args.sbatch"),
               "exec \"$COHORT\" launch -v --launcher-args \"--export=ALL,COHORT_WORDS='two "
               "words'\" " +
                   worker + "\n");
  // Two tasks a node: two workers on each, from SLURM_TASKS_PER_NODE.
  auto submit = [&](const std::vector<std::string>& worker_args) {
    return cluster.submit(concat(concat(fit(2, {"--ntasks-per-node=2", "--output=launch-%j.out"}),
                                        {scratch.file("launch.sbatch")}),
                                 worker_args));
  };
  std::string job = submit({});
  std::string state = cluster.wait_for_end(job, 60s);
  std::string output = read_file(scratch.file("launch-" + job + ".out"));
  INFO(output << cluster.job(job));
  CHECK(state == "COMPLETED");
  CHECK(cluster.job_field(job, "ExitCode") == "0:0");
  CHECK(contains(output,
                 "2 hosts from the Slurm allocation (SLURM_JOB_NODELIST=node[1-2]), "
                 "token sent over srun"));
  for (int rank = 0; rank < 4; ++rank) {
    EnvDump env = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "4");
    CHECK(env_value(env, "SLURMD_NODENAME") == (rank < 2 ? "node1" : "node2"));
    CHECK(env_value(env, "SLURM_JOB_ID") == job);
    CHECK(env_value(env, "SLURM_STEP_ID") != "<unset>");     // a step's, not the batch script's
    CHECK(env_value(env, "CUDA_VISIBLE_DEVICES") == "0,1");  // the step has the node's GPUs
  }
  {  // GPUs per task: each step asks for its node's two tasks' worth, not the one it inherits;
     // and each step's srun takes --launcher-args' quoted words whole
    for (int rank = 0; rank < 4; ++rank)
      ::unlink(scratch.file("env_" + std::to_string(rank) + ".json").c_str());
    std::string per_task = cluster.submit(
        {"--nodes=2", "--ntasks-per-node=2", "--gpus-per-task=1", "--cpus-per-task=2", "--time=4",
         "--output=launch-%j.out", scratch.file("launch-args.sbatch")});
    CHECK(cluster.wait_for_end(per_task, 60s) == "COMPLETED");
    INFO(read_file(scratch.file("launch-" + per_task + ".out")) << cluster.job(per_task));
    for (int rank = 0; rank < 4; ++rank) {
      EnvDump env = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
      CHECK(env_value(env, "SLURM_GPUS_PER_TASK") == "1");
      CHECK(env_value(env, "CUDA_VISIBLE_DEVICES") == "0,1");
      CHECK(env_value(env, "COHORT_WORDS") == "two words");
    }
  }

  {  // a worker's failure is the job's exit code
    std::string failed = submit({"--only-rank", "3", "--exit-code", "7"});
    CHECK(cluster.wait_for_end(failed, 60s) == "FAILED");
    INFO(read_file(scratch.file("launch-" + failed + ".out")));
    CHECK(cluster.job_field(failed, "ExitCode") == "7:0");
  }
  // A job whose 4 workers are running: its id and its launch's pid.
  auto running = [&](const std::vector<std::string>& worker_args) {
    for (int rank = 0; rank < 4; ++rank)
      ::unlink(scratch.file("ready_" + std::to_string(rank)).c_str());
    std::string id = submit(worker_args);
    auto all_ready = [&] {
      for (int rank = 0; rank < 4; ++rank) {
        if (!file_exists(scratch.file("ready_" + std::to_string(rank)))) return false;
      }
      return true;
    };
    poll_until([&] { return all_ready() || !cluster.job_active(id); }, 60s);
    INFO(read_file(scratch.file("launch-" + id + ".out")) << cluster.job(id));
    REQUIRE(all_ready());
    pid_t launch = launch_process(id);
    REQUIRE(launch > 0);
    return std::pair{id, launch};
  };
  auto agents_gone = [&](const std::string& id) {
    return cohort_agent(id, "node1") == 0 && cohort_agent(id, "node2") == 0;
  };
  {  // a launch killed with SIGKILL: every agent reads the end of its input and stops
    auto [hung, launch] = running({"--hang"});
    ::kill(launch, SIGKILL);
    CHECK(poll_until([&] { return agents_gone(hung); }, 30s));
    CHECK(cluster.wait_for_end(hung, 30s) != "");
  }
  // Workers that ignore SIGTERM, a third Ctrl-C: srun has Slurm kill each step at once (the
  // agents themselves would wait the 30 s --shutdown-timeout before SIGKILL).
  {
    auto [stuck, launch] = running({"--hang", "--ignore-sigterm", "--pid-file", "pid_{RANK}"});
    for (int i = 0; i < 3; ++i) {
      ::kill(launch, SIGINT);
      std::this_thread::sleep_for(300ms);  // one at a time: signals of a kind do not queue
    }
    CHECK(poll_until([&] { return agents_gone(stuck); }, 20s));
    for (int rank = 0; rank < 4; ++rank) {
      pid_t worker = read_pid(scratch.file("pid_" + std::to_string(rank)));
      CHECK(poll_until([&] { return !process_alive(worker); }, 10s, 100ms));
    }
    CHECK(cluster.wait_for_end(stuck, 30s) == "FAILED");
    std::string output = read_file(scratch.file("launch-" + stuck + ".out"));
    INFO(output);
    CHECK(cluster.job_field(stuck, "ExitCode") == "130:0");
    CHECK(contains(output, "received SIGINT again: ending every srun step"));
  }
  cluster.stop();
  CHECK(scratch.nothing_left());
}

TEST_CASE("scancel --signal=USR1 reaches every worker once, and they keep running",
          "[integration][slurm][signals]") {
  require_slurm();
  Scratch scratch;
  SlurmCluster cluster(scratch, 2);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  write_script(scratch.file("signals.sbatch"),
               "srun --ntasks-per-node=1 \"$COHORT\" run --no-python " +
                   std::string(kTestWorkerBin) +
                   " --ready-file ready_{SLURMD_NODENAME}_{LOCAL_RANK}"
                   " --record-signals signals_{SLURMD_NODENAME}_{LOCAL_RANK} --hang\n");
  std::string job =
      cluster.submit(concat(fit(2, {"--output=signals-%j.out"}), {scratch.file("signals.sbatch")}));
  const std::vector<std::string> workers{"node1_0", "node1_1", "node2_0", "node2_1"};
  auto all_have = [&](const std::string& prefix, const std::string& text) {
    for (const auto& worker : workers) {
      if (!contains(read_file(scratch.file(prefix + worker)), text)) return false;
    }
    return true;
  };
  auto all_ready = [&] {
    for (const auto& worker : workers) {
      if (!file_exists(scratch.file("ready_" + worker))) return false;
    }
    return true;
  };
  poll_until([&] { return all_ready() || !cluster.job_active(job); }, 60s);
  bool started = all_ready();
  INFO(read_file(scratch.file("signals-" + job + ".out")) << cluster.job(job));
  REQUIRE(started);
  RunResult signalled = cluster.client({"scancel", "--signal=USR1", job});
  CHECK(signalled.status.success());
  std::string usr1 = std::to_string(SIGUSR1) + "\n";
  CHECK(poll_until([&] { return all_have("signals_", usr1); }, 20s, 100ms));
  std::this_thread::sleep_for(500ms);  // a second copy (cohort forwarding it too) would show
  for (const auto& worker : workers) CHECK(read_file(scratch.file("signals_" + worker)) == usr1);
  CHECK(cluster.job_field(job, "JobState") == "RUNNING");  // a warning, not a stop
  CHECK(cluster.client({"scancel", job}).status.success());
  CHECK(cluster.wait_for_end(job, 60s) == "CANCELLED");
  cluster.stop();
  CHECK(scratch.nothing_left());
}

namespace {

/// An elastic.sbatch job of `nodes` nodes on CPU, 60 steps, one of whose agents is SIGKILLed once
/// training reached step 12: the one hosting the rendezvous, or one that does not.
struct ElasticJob {
  std::string job, output, state, exit_code;
  std::vector<StepLine> steps;
};
ElasticJob run_elastic(Scratch& scratch, SlurmCluster& cluster, int nodes, bool kill_host) {
  ElasticJob run;
  std::string steps = scratch.file("steps.log");
  run.job = cluster.submit(
      concat(fit(nodes), {script("elastic.sbatch"), "--epochs", "3", "--steps-per-epoch", "20",
                          "--checkpoint-every", "5", "--step-sleep", "0.25", "--global-batch-size",
                          "24",  // 6, 4 and 2 ranks divide it
                          "--device", "cpu", "--step-log", steps}),
      example_env());
  std::string output_name = "cohort-elastic-" + run.job + ".out";
  bool training = training_reached(cluster, run.job, steps, 12);
  INFO(read_file(scratch.file(output_name)) << cluster.job(run.job));
  REQUIRE(training);
  // Every agent sees the nodes' addresses as local; the one that bound the port first hosts the
  // rendezvous.
  int port = cohort::slurm_rendezvous_port(std::stoull(run.job), 0);  // the script's one srun step
  pid_t victim = 0;
  for (int k = 1; k <= nodes; ++k) {
    pid_t agent = cohort_agent(run.job, "node" + std::to_string(k));
    REQUIRE(agent > 0);
    if (listens_on(agent, port) == kill_host) victim = agent;
  }
  REQUIRE(victim > 0);
  ::kill(victim, SIGKILL);  // as a node that crashed
  run.state = cluster.wait_for_end(run.job, 180s);
  run.output = read_file(scratch.file(output_name));
  run.exit_code = cluster.job_field(run.job, "ExitCode");
  run.steps = step_log(steps);
  return run;
}

/// The job trained all 60 steps, from `first_world` ranks down to `last_world`, resuming from a
/// checkpoint; srun's status is the worst task's: the killed agent's 128 + SIGKILL, although the
/// training finished (docs/guide/slurm.md says so).
void check_finished_smaller(const ElasticJob& run, int first_world, int last_world) {
  CHECK(contains(run.output, "[default0]:done: 60 steps, final loss "));
  REQUIRE(!run.steps.empty());
  CHECK(run.steps.front().world_size == first_world);
  CHECK(run.steps.back().world_size == last_world);
  CHECK(run.steps.back().round > 0);
  CHECK(run.steps.back().step == 59);
  auto resumed = resumed_steps(run.output);
  REQUIRE(!resumed.empty());
  CHECK(resumed.back() >= 10);
  CHECK(run.state == "FAILED");
  CHECK(run.exit_code == "137:0");
}

}  // namespace

TEST_CASE("elastic.sbatch: a node's agent dies and the job finishes on the other node",
          "[integration][slurm][elastic]") {
  require_slurm();
  require_torch();
  Scratch scratch;
  SlurmCluster cluster(scratch, 2);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  ElasticJob run = run_elastic(scratch, cluster, 2, /*kill_host=*/false);
  INFO(run.output << cluster.job(run.job));
  check_finished_smaller(run, 4, 2);
  cluster.stop();
  CHECK(scratch.nothing_left());
}

// Three nodes: the run has fallback endpoints (the node list's next two hosts), so losing the
// node whose agent hosts the rendezvous no longer ends the job.
TEST_CASE("elastic.sbatch: the node hosting the rendezvous dies and the others finish the job",
          "[integration][slurm][elastic][fallback]") {
  require_slurm();
  require_torch();
  Scratch scratch;
  SlurmCluster cluster(scratch, 3);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  ElasticJob run = run_elastic(scratch, cluster, 3, /*kill_host=*/true);
  INFO(run.output << cluster.job(run.job));
  int port = cohort::slurm_rendezvous_port(std::stoull(run.job), 0);  // the script's one srun step
  CHECK(contains(run.output, "the rendezvous moves to node2:" + std::to_string(port)));
  check_finished_smaller(run, 6, 4);
  cluster.stop();
  CHECK(scratch.nothing_left());
}

TEST_CASE("preemptible.sbatch: warned by USR1, checkpoints, requeues itself and resumes",
          "[integration][slurm][preempt]") {
  require_slurm();
  require_torch();
  Scratch scratch;
  SlurmCluster cluster(scratch, 2);
  INFO(cluster.logs());
  REQUIRE(cluster.ready());
  std::string steps = scratch.file("steps.log");
  std::string job = cluster.submit(
      concat(fit(2), {script("preemptible.sbatch"), "--epochs", "3", "--steps-per-epoch", "20",
                      "--checkpoint-every", "5", "--step-sleep", "0.25", "--device", "cpu",
                      "--step-log", steps}),
      example_env());
  std::string output_name = "cohort-preemptible-" + job + ".out";
  bool training = training_reached(cluster, job, steps, 12);
  INFO(read_file(scratch.file(output_name)) << cluster.job(job));
  REQUIRE(training);
  // What `#SBATCH --signal=B:USR1@120` does 120 s before the time limit.
  CHECK(cluster.client({"scancel", "--batch", "--signal=USR1", job}).status.success());
  CHECK(poll_until([&] { return cluster.job_field(job, "Restarts") == "1"; }, 60s));
  std::string state = cluster.wait_for_end(job, 180s);
  std::string output = read_file(scratch.file(output_name));
  INFO(output << cluster.job(job));
  CHECK(state == "COMPLETED");
  CHECK(cluster.job_field(job, "ExitCode") == "0:0");
  CHECK(contains(output, "USR1 from Slurm: checkpointing, then requeueing"));
  std::smatch stopped;
  REQUIRE(
      std::regex_search(output, stopped, std::regex("stop requested: checkpoint at step (\\d+)")));
  int checkpoint_step = std::stoi(stopped[1]);
  CHECK(checkpoint_step > 12);
  CHECK(checkpoint_step < 60);
  auto resumed = resumed_steps(output);
  REQUIRE(resumed.size() == 1);
  CHECK(resumed[0] == checkpoint_step);  // the second run picks up exactly where the first stopped
  CHECK(contains(output, "job " + job + " run 1 on node[1-2]"));
  CHECK(contains(output, "[default0]:done: 60 steps, final loss "));
  cluster.stop();
  CHECK(scratch.nothing_left());
}
