// `cohort launch` against real OpenSSH servers on 127.0.0.2, 127.0.0.3, ...: a Gloo job across
// three hosts, the environment each host gets, --include/--exclude, hostfile errors, Ctrl-C (also
// while the agents are still starting), a host killed mid-run, an unreachable host, the root
// cause's exit code, the run's token (generated or given) that travels over ssh's stdin and shows
// on no command line, a console that stops reading, and processes killed at random inside a run.

#include <algorithm>
#include <cctype>
#include <csignal>
#include <filesystem>
#include <functional>
#include <random>
#include <regex>
#include <thread>

#include "common/event_log.hpp"
#include "common/exit_codes.hpp"
#include "tests/integration/multinode_support.hpp"
#include "tests/integration/netns_support.hpp"
#include "tests/integration/ssh_support.hpp"

namespace cohort::test {
namespace {

const std::string kAllreduce = std::string(kSourceDir) + "/tests/integration/elastic_allreduce.py";

// The environment of the launching shell: torch's Python, Gloo on loopback.
std::map<std::string, std::string> launch_env() {
  return {{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}};
}

// A Slurm job on this machine alone, for a launch whose hosts start as job steps: a fake srun
// in `bin/` of the scratch writes its words, one a line, to srun_args.PID, then runs the step's
// `/bin/sh -c LINE` here, as a step on host localhost would.
std::map<std::string, std::string> fake_slurm_job(const Scratch& scratch,
                                                  const std::string& tasks_per_node) {
  std::filesystem::create_directories(scratch.file("bin"));
  write_script(scratch.file("bin/srun"),
               "for word in \"$@\"; do printf '%s\\n' \"$word\"; done > " +
                   scratch.file("srun_args.") + "$$\nshift $(($# - 3))\nexec \"$@\"\n");
  const char* path = std::getenv("PATH");
  auto env = launch_env();
  env["PATH"] = scratch.file("bin") + ":" + (path ? path : "/usr/bin:/bin");
  env["SLURM_JOB_ID"] = "9003";
  env["SLURM_JOB_NODELIST"] = "localhost";
  env["SLURM_TASKS_PER_NODE"] = tasks_per_node;
  return env;
}

// The words of the fake srun's one run.
std::vector<std::string> srun_words(const Scratch& scratch) {
  std::vector<std::string> files = entries_starting_with(scratch.path(), "srun_args.");
  REQUIRE(files.size() == 1);
  return split_lines(read_file(scratch.file(files[0])));
}

// `cohort launch` with the servers' ssh flags and the scratch's marker and TMPDIR forwarded, so
// that the leftover check sees every remote process too.
std::vector<std::string> launch_argv(const SshHosts& hosts, const std::vector<std::string>& args) {
  std::vector<std::string> argv{kCohortBin, "launch", "-x", "COHORT_TEST_MARKER", "-x", "TMPDIR"};
  for (const auto& flag : hosts.flags()) argv.push_back(flag);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

RunResult launch(const Scratch& scratch, const SshHosts& hosts,
                 const std::vector<std::string>& args,
                 std::map<std::string, std::string> env = launch_env(),
                 std::chrono::milliseconds timeout = 120s) {
  return scratch.run_argv(launch_argv(hosts, args), scratch.options(env), timeout);
}

std::string host_list(const SshHosts& hosts, int slots) {
  std::string list;
  for (const auto& address : hosts.addresses())
    list += (list.empty() ? "" : ",") + address + ":" + std::to_string(slots);
  return list;
}

std::vector<std::string> dump_env_worker() {
  return {"--no-python", kTestWorkerBin, "--dump-env", "env_{RANK}.json"};
}

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// A launch on `hosts` through `endpoint`'s cohortd whose test workers hang, returned once all
// `workers` of them have started.
std::unique_ptr<ChildProcess> hanging_launch(const Scratch& scratch, const SshHosts& hosts,
                                             const std::string& endpoint, int slots,
                                             size_t workers) {
  auto launcher = std::make_unique<ChildProcess>(
      launch_argv(hosts, with({"-H", host_list(hosts, slots), "--rdzv-endpoint", endpoint},
                              with(dump_env_worker(), {"--hang"}))),
      scratch.options(launch_env()));
  INFO(launcher->output());
  REQUIRE(wait_until(
      [&] { return entries_starting_with(scratch.path(), "env_").size() == workers; }, 60s));
  return launcher;
}

// The first process started for the run whose command line (words joined by spaces) `matches`.
std::optional<pid_t> run_process(const Scratch& scratch,
                                 const std::function<bool(const std::string&)>& matches) {
  for (pid_t pid : scratch.leftovers()) {
    std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (matches(cmdline)) return pid;
  }
  return std::nullopt;
}

// The remote `cohort run` of host `address` (its agent), found by its command line.
std::optional<pid_t> remote_agent(const Scratch& scratch, const std::string& address) {
  return run_process(scratch, [&](const std::string& cmdline) {
    return cmdline.rfind(std::string(kCohortBin) + " run ", 0) == 0 &&
           contains(cmdline, "--local-addr " + address + " ");
  });
}

// The ssh client that carries host `address`'s agent (the launcher's child).
std::optional<pid_t> ssh_client(const Scratch& scratch, const std::string& address) {
  return run_process(scratch, [&](const std::string& cmdline) {
    return cmdline.rfind("/usr/bin/ssh -T ", 0) == 0 && contains(cmdline, " " + address + " ") &&
           contains(cmdline, " --under-launch ");
  });
}

/// The words of a process's command line.
std::vector<std::string> command_words(pid_t pid) {
  std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> words;
  for (size_t start = 0, end; start < cmdline.size(); start = end + 1) {
    end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    words.push_back(cmdline.substr(start, end - start));
  }
  return words;
}

/// The rendezvous endpoint the launch's remote agents were given.
std::string launched_endpoint(const Scratch& scratch, const std::string& address) {
  auto agent = remote_agent(scratch, address);
  REQUIRE(agent);
  std::vector<std::string> words = command_words(*agent);
  auto flag = std::find(words.begin(), words.end(), "--rdzv-endpoint");
  REQUIRE(flag != words.end());
  REQUIRE(flag + 1 != words.end());
  return *(flag + 1);
}

/// True when `text` holds `length` hex digits in a row (a generated token is 64; run ids and
/// everything else on the run's command lines have at most 12).
bool has_hex_run(const std::string& text, size_t length) {
  size_t run = 0;
  for (char c : text) {
    run = std::isxdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run >= length) return true;
  }
  return false;
}

/// What /proc shows of the processes started for the run but `skipped` (ssh, the remote agents,
/// their keepers and workers): each one's `file` ("cmdline" or "environ"), one per line.
std::string run_processes(const Scratch& scratch, const std::string& file, pid_t skipped = 0) {
  std::string text;
  for (pid_t pid : scratch.leftovers()) {
    if (pid != skipped) text += read_file("/proc/" + std::to_string(pid) + "/" + file) + "\n";
  }
  return text;
}

/// `cohort status` against `endpoint` without a token: refused by a daemon that has one.
RunResult status_without_token(const Scratch& scratch, const std::string& endpoint) {
  return scratch.run_argv({kCohortBin, "status", "--rdzv-endpoint", endpoint}, scratch.options(),
                          10s);
}

}  // namespace

TEST_CASE("launch: a Gloo job across three hosts, ranks in host order, host:rank prefixes",
          "[integration][launch]") {
  require_ssh();
  require_torch();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  RunResult result =
      launch(scratch, hosts, {"-H", host_list(hosts, 2), kAllreduce, "10", scratch.path()});
  INFO(result.out << result.err);
  REQUIRE(result.status == ExitStatus::exited(0));
  CHECK(contains(result.out, "[127.0.0.2:0]:done round=0 world=6"));
  for (int rank = 0; rank < 6; ++rank)
    CHECK(file_exists(scratch.file("started_0_" + std::to_string(rank))));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: environment forwarding, working directory, slots and node ranks",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  std::ofstream(scratch.file(".cohort_env")) << "# job settings\nFROM_ENV_FILE=file value\n"
                                             << "OVERRIDDEN=from file\n";
  auto env = launch_env();
  env["NCCL_DEBUG"] = "INFO";
  env["EXPORTED"] = "local value";
  env["NOT_FORWARDED"] = "x";
  env["CUDA_VISIBLE_DEVICES"] = "5";
  RunResult result = launch(scratch, hosts,
                            with({"-H", hosts.address(0) + ":2," + hosts.address(1) + ":1", "-x",
                                  "EXPORTED", "-x", "OVERRIDDEN=from -x", "-x", "SET_HERE=a b 'c'"},
                                 dump_env_worker()),
                            env);
  INFO(result.out << result.err);
  REQUIRE(result.status == ExitStatus::exited(0));
  for (int rank = 0; rank < 3; ++rank) {
    EnvDump dump = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
    INFO("rank " << rank);
    CHECK(env_value(dump, "WORLD_SIZE") == "3");
    CHECK(env_value(dump, "GROUP_RANK") == (rank < 2 ? "0" : "1"));
    CHECK(env_value(dump, "LOCAL_WORLD_SIZE") == (rank < 2 ? "2" : "1"));
    CHECK(env_value(dump, "NCCL_DEBUG") == "INFO");
    CHECK(env_value(dump, "GLOO_SOCKET_IFNAME") == "lo");
    CHECK(env_value(dump, "EXPORTED") == "local value");
    CHECK(env_value(dump, "OVERRIDDEN") == "from -x");
    CHECK(env_value(dump, "SET_HERE") == "a b 'c'");
    CHECK(env_value(dump, "FROM_ENV_FILE") == "file value");
    CHECK(env_value(dump, "NOT_FORWARDED") == "<unset>");
    CHECK(env_value(dump, "CUDA_VISIBLE_DEVICES") == "<unset>");
    CHECK(env_value(dump, "PWD") == scratch.path());
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: --include and --exclude pick hosts and slots (CUDA_VISIBLE_DEVICES)",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  std::ofstream(scratch.file("hostfile")) << hosts.address(0) << " slots=2\n"
                                          << hosts.address(1) << " slots=2\n"
                                          << hosts.address(2) << " slots=2\n";
  SECTION("include") {
    RunResult result = launch(
        scratch, hosts,
        with({"--hostfile", "hostfile", "--include", hosts.address(0) + ":1@" + hosts.address(2)},
             dump_env_worker()));
    INFO(result.out << result.err);
    REQUIRE(result.status == ExitStatus::exited(0));
    EnvDump first = load_env(scratch.file("env_0.json"));
    CHECK(env_value(first, "WORLD_SIZE") == "3");
    CHECK(env_value(first, "LOCAL_WORLD_SIZE") == "1");
    CHECK(env_value(first, "CUDA_VISIBLE_DEVICES") == "1");
    EnvDump last = load_env(scratch.file("env_2.json"));
    CHECK(env_value(last, "LOCAL_WORLD_SIZE") == "2");
    CHECK(env_value(last, "CUDA_VISIBLE_DEVICES") == "<unset>");
    CHECK_FALSE(contains(result.out + result.err, "[" + hosts.address(1)));
  }
  SECTION("exclude") {
    RunResult result = launch(scratch, hosts,
                              with({"--hostfile", "hostfile", "--exclude",
                                    hosts.address(0) + "@" + hosts.address(1) + ":0"},
                                   dump_env_worker()));
    INFO(result.out << result.err);
    REQUIRE(result.status == ExitStatus::exited(0));
    EnvDump first = load_env(scratch.file("env_0.json"));
    CHECK(env_value(first, "WORLD_SIZE") == "3");
    CHECK(env_value(first, "CUDA_VISIBLE_DEVICES") == "1");
    CHECK_FALSE(file_exists(scratch.file("env_3.json")));
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: without -H or --hostfile the PBS or Slurm allocation's hosts are used",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  auto env = launch_env();
  std::string scheduler = GENERATE("PBS", "Slurm");
  if (scheduler == "PBS") {
    std::ofstream(scratch.file("nodefile")) << hosts.address(0) << "\n"
                                            << hosts.address(0) << "\n"
                                            << hosts.address(1) << "\n";
    env["PBS_NODEFILE"] = scratch.file("nodefile");
  } else {
    env["SLURM_JOB_NODELIST"] = hosts.address(0) + "," + hosts.address(1);
    env["SLURM_TASKS_PER_NODE"] = "2,1";
  }
  RunResult result = launch(scratch, hosts, with({"-v"}, dump_env_worker()), env);
  INFO(result.out << result.err);
  REQUIRE(result.status == ExitStatus::exited(0));
  CHECK(contains(result.err, "2 hosts from the " + scheduler + " allocation ("));
  for (int rank = 0; rank < 3; ++rank) {
    EnvDump dump = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
    INFO("rank " << rank);
    CHECK(env_value(dump, "WORLD_SIZE") == "3");
    CHECK(env_value(dump, "GROUP_RANK") == (rank < 2 ? "0" : "1"));
    CHECK(env_value(dump, "LOCAL_WORLD_SIZE") == (rank < 2 ? "2" : "1"));
  }
  CHECK(scratch.nothing_left());
}

// sbatch --gpus-per-task=1 --ntasks-per-node=2: the step of one task, which inherits the job's
// per-task count, showed both of the host's workers one GPU.
TEST_CASE("launch: a job step of a job with GPUs per task gets the GPUs of all its host's slots",
          "[integration][launch]") {
  Scratch scratch;
  auto env = fake_slurm_job(scratch, "2");
  env["SLURM_GPUS_PER_TASK"] = "1";
  RunResult result = scratch.run_argv(with({kCohortBin, "launch", "-v"}, dump_env_worker()),
                                      scratch.options(env), 60s);
  INFO(result.out << result.err);
  REQUIRE(result.status == ExitStatus::exited(0));
  CHECK(contains(result.err, "token sent over srun"));
  std::vector<std::string> words = srun_words(scratch);
  INFO(Catch::Detail::stringify(words));
  CHECK(std::count(words.begin(), words.end(), "--gres=gpu:2") == 1);
  CHECK(std::count(words.begin(), words.end(), "--ntasks=1") == 1);
  for (int rank = 0; rank < 2; ++rank) {
    EnvDump dump = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
    CHECK(env_value(dump, "LOCAL_WORLD_SIZE") == "2");
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: mpirun's -np and -machinefile fill the hosts' slots in order",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  std::ofstream(scratch.file("machines")) << hosts.address(0) << ":2\n"
                                          << hosts.address(1) << ":2\n"
                                          << hosts.address(2) << ":2\n";
  RunResult result =
      launch(scratch, hosts, with({"-np", "3", "-machinefile", "machines"}, dump_env_worker()));
  INFO(result.out << result.err);
  REQUIRE(result.status == ExitStatus::exited(0));
  CHECK(entries_starting_with(scratch.path(), "env_").size() == 3);
  EnvDump last = load_env(scratch.file("env_2.json"));
  CHECK(env_value(last, "WORLD_SIZE") == "3");
  CHECK(env_value(last, "GROUP_RANK") == "1");
  CHECK(env_value(last, "LOCAL_WORLD_SIZE") == "1");
  CHECK_FALSE(contains(result.out + result.err, "[" + hosts.address(2)));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: a hostfile with errors names each line, and nothing starts",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  std::ofstream(scratch.file("hostfile")) << "# cluster\n"
                                          << hosts.address(0) << " slots=2\n"
                                          << hosts.address(1) << " slots=two\n"
                                          << hosts.address(0) << " slots=1\n"
                                          << "-oProxyCommand=x slots=1\n";
  RunResult result = launch(scratch, hosts, with({"--hostfile", "hostfile"}, dump_env_worker()));
  INFO(result.out << result.err);
  CHECK(result.status == ExitStatus::exited(2));
  CHECK(contains(result.err, "hostfile:3: slots must be 1-4096, got 'two'"));
  CHECK(contains(result.err, "hostfile:4: host '127.0.0.2' is already listed on line 2"));
  CHECK(contains(result.err, "hostfile:5: '-oProxyCommand=x' is not a host name"));
  CHECK(entries_starting_with(scratch.path(), "env_").empty());
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: an unreachable host, or one without cohort, is reported before anything starts",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  SECTION("no sshd on 127.0.0.9") {
    RunResult result = launch(
        scratch, hosts,
        with({"-H", hosts.address(0) + ",127.0.0.9," + hosts.address(1)}, dump_env_worker()));
    INFO(result.out << result.err);
    CHECK(result.status == ExitStatus::exited(4));
    CHECK(contains(result.err,
                   "cohort launch: 127.0.0.9: unreachable (ssh: connect to host "
                   "127.0.0.9 port"));
    // Every host is this machine: the hint names the way that needs no ssh.
    CHECK(contains(result.err,
                   "; cohort launch reaches every host over ssh, this machine too: "
                   "for it alone, -H localhost (without --launcher ssh) needs no ssh, nor does "
                   "cohort run --standalone"));
    CHECK(contains(result.err, "nothing was started"));
    CHECK_FALSE(contains(result.err, "pam_slurm_adopt"));
  }
  SECTION("a Slurm job's node that refuses ssh: the hint names srun") {
    auto env = launch_env();
    env["SLURM_JOB_NODELIST"] = hosts.address(0) + ",127.0.0.9";
    RunResult result = launch(scratch, hosts, dump_env_worker(), env);
    INFO(result.out << result.err);
    CHECK(result.status == ExitStatus::exited(4));
    CHECK(contains(result.err, "cohort launch: 127.0.0.9: unreachable"));
    CHECK(contains(result.err,
                   "needs pam_slurm_adopt on them; without it, start them as the job's "
                   "steps: --launcher srun"));
  }
  SECTION("no cohort at --remote-cohort") {
    RunResult result =
        launch(scratch, hosts,
               with({"-H", hosts.address(0), "--remote-cohort", "/nonexistent/cohort"},
                    dump_env_worker()));
    INFO(result.out << result.err);
    CHECK(result.status == ExitStatus::exited(4));
    CHECK(contains(result.err, "127.0.0.2: no cohort at '/nonexistent/cohort'"));
  }
  CHECK(entries_starting_with(scratch.path(), "env_").empty());
  CHECK(scratch.nothing_left());
}

// Each host's agent starts in one ssh session, which also proves the host ready: the agent says
// so, then waits for its token, which the launch sends once every host is ready. A host that
// cannot start its agent (an older cohort that refuses a flag), whose agent finds its part
// missing (the training script), or that hangs before it says it is ready (a cd into a dead
// network mount), starts nothing anywhere.
TEST_CASE("launch: one ssh session per host, and nothing starts unless every agent is ready",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  const std::string bad = hosts.address(1);
  // The training program, in a directory that only the good host's PATH has.
  std::filesystem::create_directories(scratch.file("bin"));
  write_script(scratch.file("bin/train-here"),
               std::string("exec ") + kTestWorkerBin + " --dump-env env_${RANK}.json\n");
  std::string bad_host_does = "";  // the remote line's words, run by the bad host's sh
  std::string expected;
  SECTION("every host ready") {}
  SECTION("one host's cohort refuses the line") {
    bad_host_does = "echo 'cohort run: unknown --token-wait-ms' >&2; exit 2";
    expected = ": '" + scratch.file("remote-cohort") +
               " run' ended with exit code 2: cohort run: unknown --token-wait-ms";
  }
  SECTION("one host has no training script") {
    bad_host_does = std::string("exec ") + kCohortBin + " \"$@\"";
    expected = ": '" + scratch.file("remote-cohort") +
               " run' ended with exit code 127: cohort run: --no-python: 'train-here' is not an "
               "executable file in PATH";
  }
  SECTION("one host never says it is ready") {
    bad_host_does = "exec sleep 60";
    expected = ": its agent was not ready within 15 s";  // --connect-timeout 5 + 10
  }
  write_script(
      scratch.file("remote-cohort"),
      "echo \"$1\" >> " + scratch.file("sessions") + "\ncase \" $* \" in *\" " + "--local-addr " +
          bad + " \"*) " + (bad_host_does.empty() ? ";;" : bad_host_does + ";;") +
          " esac\nPATH=" + scratch.file("bin") + ":$PATH exec " + kCohortBin + " \"$@\"\n");
  auto started = std::chrono::steady_clock::now();
  RunResult result = launch(scratch, hosts,
                            {"-H", host_list(hosts, 1), "--remote-cohort",
                             scratch.file("remote-cohort"), "--no-python", "train-here"});
  INFO(result.out << result.err);
  CHECK(read_file(scratch.file("sessions")) == "run\nrun\n");  // no other session
  if (expected.empty()) {
    CHECK(result.status == ExitStatus::exited(0));
    CHECK(entries_starting_with(scratch.path(), "env_").size() == 2);
  } else {
    CHECK(result.status == ExitStatus::exited(4));
    CHECK(contains(result.err, "cohort launch: " + bad + expected));
    CHECK(contains(result.err, "cohort launch: nothing was started"));
    CHECK(entries_starting_with(scratch.path(), "env_").empty());
    CHECK_FALSE(contains(result.err, "token line"));  // the ready host's agent ended unheard
    CHECK(std::chrono::steady_clock::now() - started < 30s);
  }
  // The hung command itself stays on its host, as any ssh leaves a remote command that ignores
  // its input: this stand-in for one ends here.
  if (auto hung = run_process(scratch, [](const std::string& line) { return line == "sleep 60 "; }))
    ::kill(*hung, SIGKILL);
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: a worker failure ends every host with the root cause's exit code",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  RunResult result = launch(scratch, hosts,
                            {"-H", host_list(hosts, 2), "--no-python", kTestWorkerBin,
                             "--only-rank", "3", "--exit-code", "7", "--sleep-ms", "200"});
  INFO(result.out << result.err);
  CHECK(result.status == ExitStatus::exited(7));
  std::string summary_start = "[" + hosts.address(1) + "]: " + std::string(60, '=');
  CHECK(contains(result.err, summary_start));
  CHECK(contains(result.err, "rank      : 3 (local_rank: 1)"));
  CHECK_FALSE(contains(result.err, "[" + hosts.address(0) + "]: " + std::string(60, '=')));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: Ctrl-C stops every host's workers, nothing is left anywhere",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  ChildProcess launcher(
      launch_argv(hosts, {"-H", host_list(hosts, 2), "--no-python", kTestWorkerBin, "--dump-env",
                          "env_{RANK}.json", "--record-signals", "signals_{RANK}",
                          "--exit-on-signal", "0", "--hang"}),
      scratch.options(launch_env()));
  INFO(launcher.output());
  REQUIRE(
      wait_until([&] { return entries_starting_with(scratch.path(), "env_").size() == 6; }, 60s));
  launcher.signal(SIGINT);
  auto status = launcher.wait(30s);
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(128 + SIGINT));
  for (int rank = 0; rank < 6; ++rank)
    CHECK(read_file(scratch.file("signals_" + std::to_string(rank))) == "15\n");
  CHECK(scratch.nothing_left());
}

// The agents run their first health check before they say hello to the launch's rendezvous: a
// stop then finds no run to cancel, and the agents must still hear it when they join.
TEST_CASE("launch: a stop before the hosts' agents joined still stops them at once",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  int signal = GENERATE(SIGINT, SIGTERM);
  ChildProcess launcher(launch_argv(hosts, with({"-H", host_list(hosts, 2), "--health-check",
                                                 "touch checking_$$; sleep 1"},
                                                with(dump_env_worker(), {"--hang"}))),
                        scratch.options(launch_env()));
  INFO(launcher.output());
  REQUIRE(wait_until([&] { return entries_starting_with(scratch.path(), "checking_").size() == 2; },
                     60s));
  launcher.signal(signal);
  auto status = launcher.wait(15s);  // the default --shutdown-timeout is 30 s
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(128 + signal));
  CHECK(entries_starting_with(scratch.path(), "env_").empty());  // no worker started
  CHECK(scratch.nothing_left());
}

// The live processes whose parent is `parent` and whose program is `program` (argv[0]).
std::vector<pid_t> children_of(pid_t parent, const std::string& program) {
  std::vector<pid_t> children;
  for (const ProcStat& process : scan_processes()) {
    if (process.ppid != parent) continue;
    std::string cmdline = read_file("/proc/" + std::to_string(process.pid) + "/cmdline");
    if (cmdline.substr(0, cmdline.find('\0')) == program) children.push_back(process.pid);
  }
  return children;
}

// True once `pid` catches `signal` (cohort launch has set up its handling): a stop before that
// ends the process by the signal itself, before anything was started. ChildProcess returns once
// the child has exec'd, so the caught signals read here are never the test process's own.
bool catches(pid_t pid, int signal) { return in_signal_mask(pid, "SigCgt", signal); }

// Whatever the moment (the hosts' check, ssh starting the agents, a health check, a round, a
// restart), a stop ends the launch within seconds with the signal's code or the run's own, and
// leaves nothing on any host. The moments come from a seed (COHORT_STOP_SEED, else a fresh one).
TEST_CASE("launch: a stop signal at a random moment ends every host cleanly",
          "[integration][launch][signals]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  unsigned seed = stop_seed();
  std::mt19937 random(seed);
  const std::vector<std::vector<std::string>> modes{
      {"--no-python", "sleep", "30"},
      {"--health-check", "sleep 0.2", "--no-python", "sleep", "30"},
      {"--max-restarts", "3", "--no-python", "sh", "-c", "sleep 0.2; exit 3"}};
  const int signals[] = {SIGINT, SIGTERM, SIGHUP};
  for (int trial = 0; trial < 8; ++trial) {
    const std::vector<std::string>& mode = modes[random() % modes.size()];
    int signal = signals[random() % 3];
    auto delay = std::chrono::milliseconds(random() % 3000);
    INFO("COHORT_STOP_SEED=" << seed << " trial " << trial << ": " << mode.back() << " " << signal
                             << " after " << delay.count() << " ms");
    ChildProcess launcher(launch_argv(hosts, with({"-H", host_list(hosts, 2)}, mode)),
                          scratch.options(launch_env()));
    REQUIRE(wait_until([&] { return catches(launcher.pid(), signal); }, 10s));
    std::this_thread::sleep_for(delay);
    launcher.signal(signal);
    auto status = launcher.wait(15s);  // the default --shutdown-timeout is 30 s
    INFO(launcher.output());
    REQUIRE(status);
    CHECK(!status->signaled);
    CHECK((status->code < 128 || status->code == 128 + signal));
    REQUIRE(scratch.nothing_left());
  }
}

// `nohup cohort launch ... &`: a hangup to the launch's process group (as a shell sends it to its
// jobs when the terminal closes) stops no host; SIGTERM still ends every host.
TEST_CASE("launch: under nohup a hangup stops nothing, SIGTERM still ends every host",
          "[integration][launch][signals]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  std::vector<std::string> argv =
      launch_argv(hosts, with({"-H", host_list(hosts, 1)}, with(dump_env_worker(), {"--hang"})));
  argv.insert(argv.begin(), "/usr/bin/nohup");
  ChildProcess launcher(argv, scratch.options(launch_env()));
  INFO(launcher.output());
  REQUIRE(
      wait_until([&] { return entries_starting_with(scratch.path(), "env_").size() == 2; }, 60s));
  REQUIRE(wait_until([&] { return catches(launcher.pid(), SIGTERM); }));
  CHECK_FALSE(catches(launcher.pid(), SIGHUP));
  std::vector<pid_t> agents;
  for (const auto& address : hosts.addresses()) {
    auto agent = remote_agent(scratch, address);
    REQUIRE(agent);
    agents.push_back(*agent);
  }
  // ssh runs in process groups of its own, which a job's hangup does not reach (an ssh that
  // shares a connection catches SIGHUP whatever it inherited).
  std::vector<pid_t> ssh_processes = children_of(launcher.pid(), "/usr/bin/ssh");
  REQUIRE(ssh_processes.size() == 2);
  for (pid_t ssh : ssh_processes) CHECK(::getpgid(ssh) != ::getpgid(launcher.pid()));
  ::kill(-launcher.pid(), SIGHUP);
  std::this_thread::sleep_for(1s);
  CHECK_FALSE(launcher.wait(0ms).has_value());
  for (pid_t agent : agents) CHECK(process_alive(agent));
  launcher.signal(SIGTERM);
  auto status = launcher.wait(30s);
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(128 + SIGTERM));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: --rdzv-endpoint uses a running cohortd, Ctrl-C closes the ssh connections",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  SshHosts hosts(scratch, 2);
  SECTION("a run") {
    RunResult result =
        launch(scratch, hosts,
               with({"-H", host_list(hosts, 1), "--rdzv-endpoint", cluster.endpoint()},
                    dump_env_worker()));
    INFO(result.out << result.err);
    REQUIRE(result.status == ExitStatus::exited(0));
    EnvDump dump = load_env(scratch.file("env_1.json"));
    CHECK(env_value(dump, "WORLD_SIZE") == "2");
    CHECK(env_value(dump, "MASTER_ADDR") == "127.0.0.1");
  }
  SECTION("Ctrl-C without the daemon's help: each remote agent sees its ssh connection end") {
    auto started = hanging_launch(scratch, hosts, cluster.endpoint(), 2, 4);
    ChildProcess& launcher = *started;
    INFO(launcher.output());
    launcher.signal(SIGINT);
    auto status = launcher.wait(30s);
    REQUIRE(status);
    CHECK(*status == ExitStatus::exited(128 + SIGINT));
    CHECK(contains(launcher.err(), "the connection to cohort launch is gone"));
  }
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

namespace {

// An elastic Gloo job (--nnodes 2:3) on three hosts of two workers each, `steps` all-reduces
// long, returned once every worker of its first round has started, with host 3's agent's pid.
std::unique_ptr<ChildProcess> elastic_launch(const Scratch& scratch, const SshHosts& hosts,
                                             const std::string& steps,
                                             const std::vector<std::string>& flags,
                                             pid_t& third_agent) {
  auto launcher = std::make_unique<ChildProcess>(
      launch_argv(hosts, with({"-H", host_list(hosts, 2), "--nnodes", "2:3", "--max-restarts", "3"},
                              with(flags, {kAllreduce, steps, scratch.path()}))),
      scratch.options(launch_env()));
  INFO(launcher->output());
  REQUIRE(wait_until([&] { return file_exists(scratch.file("started_0_5")); }, 60s));
  auto agent = remote_agent(scratch, hosts.address(2));
  REQUIRE(agent);
  third_agent = *agent;
  return launcher;
}

}  // namespace

TEST_CASE("launch: a host killed mid-run with --nnodes 2:3, the other two finish the job",
          "[integration][launch]") {
  require_ssh();
  require_torch();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  pid_t agent = 0;
  auto launcher = elastic_launch(scratch, hosts, "60", {"--host-retries", "1"}, agent);
  ::kill(agent, SIGKILL);  // the host dies: its agent, then (its keeper) its workers
  hosts.take_down(2);
  auto status = launcher->wait(90s);
  INFO(launcher->output());
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(0));
  CHECK(contains(launcher->out(), "done round=1 world=4"));
  CHECK(contains(launcher->err(), hosts.address(2) + ": lost"));
  // Tried once more while the others went on, refused (no sshd), then left out.
  CHECK(
      contains(launcher->err(), hosts.address(2) + ": not started again (--host-retries 1 used)"));
  CHECK(scratch.nothing_left());
}

// The host stays reachable (its sshd runs) but its agent dies: the launch starts it again, and it
// comes back through a scale-up round.
TEST_CASE("launch: a lost host is started again and rejoins the run (--host-retries)",
          "[integration][launch]") {
  require_ssh();
  require_torch();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  pid_t agent = 0;
  auto launcher = elastic_launch(scratch, hosts, "200", {}, agent);
  ::kill(agent, SIGKILL);
  auto status = launcher->wait(120s);
  INFO(launcher->output());
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(0));
  CHECK(contains(launcher->err(), hosts.address(2) + ": lost"));
  CHECK(contains(launcher->err(),
                 hosts.address(2) + ": starting its agent again in 1 s (1 of 10, --host-retries)"));
  // The two others restarted without it (round 1, unless it was back in time for that one), then
  // took it back in: the job ended in a world of all six ranks again.
  CHECK(std::regex_search(launcher->out(), std::regex("done round=[12] world=6")));
  CHECK(std::regex_search(launcher->err(),
                          std::regex(hosts.address(2) + ": back in the run \\(round [12], a world "
                                                        "of 6\\)")));
  CHECK(scratch.nothing_left());
}

// The host goes down (agent and sshd) and comes back while the launch keeps trying: its second
// try gets in, and the host rejoins the run as in a reboot.
TEST_CASE("launch: a host that is down for a while rejoins once it answers again",
          "[integration][launch]") {
  require_ssh();
  require_torch();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  pid_t agent = 0;
  auto launcher = elastic_launch(scratch, hosts, "200", {}, agent);
  hosts.take_down(2);
  ::kill(agent, SIGKILL);
  REQUIRE(wait_until(
      [&] { return contains(launcher->err(), "starting its agent again in 2 s (2 of 10"); }, 30s));
  hosts.restart(2);
  auto status = launcher->wait(120s);
  INFO(launcher->output());
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(0));
  CHECK(contains(launcher->err(), "Connection refused"));  // the first try found the host down
  CHECK(contains(launcher->err(), hosts.address(2) + ": back in the run (round "));
  CHECK(std::regex_search(launcher->out(), std::regex("done round=[12] world=6")));
  CHECK(scratch.nothing_left());
}

// With a daemon of its own the launch cannot stop the run through it: it closes every ssh
// connection, and the agents end as on SIGHUP (129). The launch's code is still the reason's.
namespace {

// Complete environment dumps of round `round` ("env_<round>_<rank>.json") and their WORLD_SIZE.
size_t dumps_of_round(const Scratch& scratch, int round, const std::string& world) {
  size_t count = 0;
  for (const auto& name :
       entries_starting_with(scratch.path(), "env_" + std::to_string(round) + "_")) {
    if (ends_with(name, ".json") && env_value(load_env(scratch.file(name)), "WORLD_SIZE") == world)
      ++count;
  }
  return count;
}

// Whether `pid` has ended: gone, or a zombie that its (stopped) parent has not reaped.
bool ended(pid_t pid) {
  auto stat = read_proc_stat(pid);
  return !stat || stat->state == 'Z';
}

// A launch of three hosts, one test worker each (--nnodes 2:3), that notices a dead ssh
// connection within about 2 s; each worker dumps its environment to env_<round>_<rank>.json.
std::vector<std::string> round_dumping_launch(const SshHosts& hosts,
                                              std::vector<std::string> extra) {
  std::vector<std::string> flags{"-H",
                                 host_list(hosts, 1),
                                 "--nnodes",
                                 "2:3",
                                 "--shutdown-timeout",
                                 "2",
                                 "--ssh-option",
                                 "ServerAliveInterval=1",
                                 "--ssh-option",
                                 "ServerAliveCountMax=2"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return launch_argv(hosts,
                     with(flags, {"--no-python", kTestWorkerBin, "--dump-env",
                                  "env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json", "--hang"}));
}

// True once some round after `after` has dumps from all three ranks in a world of 3.
bool back_to_three(const Scratch& scratch, int after) {
  return wait_until(
      [&] {
        for (int round = after + 1; round < after + 6; ++round) {
          if (dumps_of_round(scratch, round, "3") == 3) return true;
        }
        return false;
      },
      60s);
}

// The host at `address` runs an agent other than `earlier`; then SIGTERM ends the launch with 143
// and leaves nothing anywhere.
void check_replaced_then_stop(const Scratch& scratch, ChildProcess& launcher,
                              const std::string& address, pid_t earlier) {
  CHECK(
      wait_until([&] { return contains(launcher.err(), address + ": back in the run (round "); }));
  auto now = remote_agent(scratch, address);
  CHECK((now && *now != earlier));
  launcher.signal(SIGTERM);
  auto status = launcher.wait(30s);
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(128 + SIGTERM));
  CHECK(scratch.nothing_left());
}

}  // namespace

// Only the ssh connection dies (its sshd stops answering: a firewall that drops the connection
// looks the same), while the host's agent runs on in the run: the launch starts the host again,
// and the new agent stops the earlier one before it joins, so the host never has two agents.
TEST_CASE("launch: a host whose ssh connection died but whose agent lives gets one agent again",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  ChildProcess launcher(round_dumping_launch(hosts, {}), scratch.options(launch_env()));
  INFO(launcher.output());
  REQUIRE(wait_until([&] { return dumps_of_round(scratch, 0, "3") == 3; }, 60s));
  auto earlier = remote_agent(scratch, hosts.address(2));
  REQUIRE(earlier);
  auto session = read_proc_stat(*earlier);  // the sshd process that serves its connection
  REQUIRE(session);
  REQUIRE(::kill(session->ppid, SIGSTOP) == 0);
  bool earlier_ended = wait_until([&] { return ended(*earlier); }, 30s);
  ::kill(session->ppid, SIGCONT);
  CHECK(earlier_ended);
  CHECK(contains(launcher.err(), hosts.address(2) + ": lost (ssh exited 255"));
  CHECK(contains(launcher.err(), "earlier agent of the run is still running (pid " +
                                     std::to_string(*earlier) + ")"));
  CHECK(back_to_three(scratch, 0));
  check_replaced_then_stop(scratch, launcher, hosts.address(2), *earlier);
}

// The third host sits in a network namespace of its own, and its link is cut mid-run (a switch
// port fails), then restored: ssh notices, the others go on without it, the launch's retries
// fail while the link is down, and once it is back the host rejoins and the job runs on all
// three again, with one agent on that host. The agent cut off may hear of the end of its ssh
// connection when the link comes back (sshd gets the launch's side's FIN late), or not (after a
// longer cut): either way it is gone once the new one runs.
TEST_CASE("launch: a host cut off by the network rejoins once its link is back",
          "[integration][launch][netns]") {
  require_ssh();
  require_prerequisite(::geteuid() == 0, "root, for network namespaces (run the tests as root)");
  NetnsNode cut;
  require_prerequisite(cut.ready,
                       "network namespaces and veth pairs (ip netns, ip link: iproute2)");
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  hosts.add_in_namespace(cut.ns, cut.ns_ip);
  ChildProcess launcher(
      round_dumping_launch(hosts,
                           {"--rdzv-host", cut.host_ip, "--rdzv-conf",
                            "last_call_timeout=1,heartbeat_timeout=1.5,keep_alive_interval=0.2"}),
      scratch.options(launch_env()));
  INFO(launcher.output());
  REQUIRE(wait_until([&] { return dumps_of_round(scratch, 0, "3") == 3; }, 60s));
  auto earlier = remote_agent(scratch, cut.ns_ip);
  REQUIRE(earlier);
  REQUIRE(cut.set_link(false));
  CHECK(wait_until([&] { return dumps_of_round(scratch, 1, "2") == 2; }, 30s));
  CHECK(wait_until([&] { return contains(launcher.err(), cut.ns_ip + ": lost (ssh exited 255"); },
                   30s));
  // A retry while the link is down fails at once (no route to the host) and is tried again.
  CHECK(wait_until([&] { return contains(launcher.err(), "(2 of 10, --host-retries)"); }, 30s));
  REQUIRE(cut.set_link(true));
  CHECK(back_to_three(scratch, 1));
  CHECK(wait_until([&] { return ended(*earlier); }, 10s));
  check_replaced_then_stop(scratch, launcher, cut.ns_ip, *earlier);
}

TEST_CASE("launch: too few hosts left with --rdzv-endpoint ends the launch with exit code 4",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  SshHosts hosts(scratch, 2);
  auto started = hanging_launch(scratch, hosts, cluster.endpoint(), 1, 2);
  ChildProcess& launcher = *started;
  INFO(launcher.output());
  auto ssh = ssh_client(scratch, hosts.address(1));
  REQUIRE(ssh);
  ::kill(*ssh, SIGKILL);
  auto status = launcher.wait(30s);
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(kExitUnreachable));
  CHECK(contains(launcher.err(), hosts.address(1) + " was lost and 1 hosts are left"));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// An agent that ends on its own (here SIGTERM: an operator, a node's shutdown) leaves a run that
// goes on; with fewer than --nnodes' minimum left the other host would wait for it until its join
// timeout (600 s), since under a launch no host comes back: the launch stops every host instead.
TEST_CASE("launch: a host whose agent ends on its own with too few left ends the launch (exit 4)",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  SshHosts hosts(scratch, 2);
  bool external = GENERATE(false, true);
  INFO((external ? "through an external cohortd" : "through the launch's own daemon"));
  std::vector<std::string> args{"-H", host_list(hosts, 1),  "--max-restarts",
                                "2",  "--shutdown-timeout", "1"};
  if (external) args = with(args, {"--rdzv-endpoint", cluster.endpoint()});
  ChildProcess launcher(launch_argv(hosts, with(args, with(dump_env_worker(), {"--hang"}))),
                        scratch.options(launch_env()));
  INFO(launcher.output());
  REQUIRE(
      wait_until([&] { return entries_starting_with(scratch.path(), "env_").size() == 2; }, 60s));
  auto agent = remote_agent(scratch, hosts.address(1));
  REQUIRE(agent);
  ::kill(*agent, SIGTERM);
  auto status = launcher.wait(30s);  // external: --shutdown-timeout + 5 s after the host ended
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(kExitUnreachable));
  CHECK(contains(launcher.err(), hosts.address(1) + " ended (exit code 143) and 1 hosts are left"));
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

// A host whose first health check outlasts the run (here: 127.0.0.4's sleeps 4 s, the others'
// workers 1 s) joins after the run completed: it ends as the run did, running nothing, and the
// launch exits 0 at once instead of waiting for that host's join timeout.
TEST_CASE("launch: a host whose health check outlasts the run ends with it and runs nothing",
          "[integration][launch]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 3);
  std::string slow_host = hosts.address(2);
  RunResult result =
      launch(scratch, hosts,
             with({"-H", host_list(hosts, 1), "--nnodes", "2:3", "--rdzv-conf",
                   "last_call_timeout=0.3", "--health-check",
                   "case \"$SSH_CONNECTION\" in *\" " + slow_host + " \"*) sleep 4;; esac"},
                  with(dump_env_worker(), {"--sleep-ms", "1000"})),
             launch_env(), 60s);
  INFO(result.out << result.err);
  CHECK(result.status == ExitStatus::exited(0));
  CHECK(entries_starting_with(scratch.path(), "env_").size() == 2);
  CHECK(contains(result.err, "[" + slow_host + "]: cohort warning: rendezvous: run '"));
  CHECK(contains(result.err, "s after this node started, before it joined"));
  CHECK(scratch.nothing_left());
}

// One blow to a running launch: a process of its tree killed or paused, or a `cohort stop`
// (through an external cohortd only). What was done, for the failure message.
std::string strike(std::mt19937& random, const Scratch& scratch, const SshHosts& hosts,
                   const std::string& endpoint, const std::string& run_id) {
  auto agent = remote_agent(scratch, hosts.address(random() % 3));
  auto pick = [&](std::vector<pid_t> pids) -> std::optional<pid_t> {
    if (pids.empty()) return std::nullopt;
    return pids[random() % pids.size()];
  };
  switch (random() % (endpoint.empty() ? 6 : 7)) {
    case 0:
      if (agent) ::kill(*agent, SIGKILL);
      return "kill -9 an agent";
    case 1:
      if (auto ssh = ssh_client(scratch, hosts.address(random() % 3))) ::kill(*ssh, SIGKILL);
      return "kill -9 an ssh client";
    case 2:
      if (auto session = pick(hosts.sessions())) ::kill(*session, SIGKILL);
      return "kill -9 an sshd session";
    case 3:
      if (agent) {
        ::kill(*agent, SIGSTOP);
        std::this_thread::sleep_for(2500ms);  // past the heartbeat timeout, 2 s
        ::kill(*agent, SIGCONT);
      }
      return "pause an agent for 2.5 s";
    case 4:
      for (int worker = 0; worker < 4; ++worker) {  // at most one per slot
        auto found =
            run_process(scratch, [](const std::string& cmdline) { return cmdline == "sleep 3 "; });
        if (found) ::kill(*found, SIGKILL);
      }
      return "kill -9 the workers";
    case 5:
      if (agent) ::kill(*agent, SIGTERM);
      return "SIGTERM to an agent";
    default:
      run_to_end({kCohortBin, "stop", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id},
                 scratch.options(), 10s);
      return "cohort stop";
  }
}

// Whatever is killed inside the launch (an agent, an ssh client or an sshd session, the
// workers), paused past the heartbeat timeout or stopped, with the launch's daemon or an external
// cohortd, the launch ends by itself with an exit code of its own or the workers', and leaves
// nothing on any host. The blows come from a seed (COHORT_STOP_SEED, else a fresh one).
TEST_CASE("launch: processes killed at random inside a running launch end it cleanly",
          "[integration][launch][chaos]") {
  require_ssh();
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.start_daemon();
  SshHosts hosts(scratch, 3);
  unsigned seed = stop_seed();
  std::mt19937 random(seed);
  for (int trial = 0; trial < 6; ++trial) {
    std::string run_id = "chaos" + std::to_string(trial);
    std::string endpoint = random() % 2 ? cluster.endpoint() : "";
    std::vector<std::string> args{
        "-H",
        hosts.address(0) + ":2," + hosts.address(1) + ":1," + hosts.address(2) + ":1",
        "--nnodes",
        "2:3",
        "--max-restarts",
        "3",
        "--rdzv-conf",
        "last_call_timeout=0.3,heartbeat_timeout=2,keep_alive_interval=0.2",
        "--shutdown-timeout",
        "1"};
    if (!endpoint.empty()) args = with(args, {"--rdzv-endpoint", endpoint, "--rdzv-id", run_id});
    ChildProcess launcher(launch_argv(hosts, with(args, {"--no-python", "sh", "-c", "sleep 3"})),
                          scratch.options(launch_env()));
    // The blows land once the hosts' agents run: ssh's start takes a second or more here.
    wait_until([&] { return remote_agent(scratch, hosts.address(2)).has_value(); }, 30s);
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 1500));
    std::string blows;
    for (int blow = 0; blow < 2; ++blow) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 900));
      blows += strike(random, scratch, hosts, endpoint, run_id) + "; ";
    }
    INFO("COHORT_STOP_SEED=" << seed << " trial " << trial << (endpoint.empty() ? "" : " (cohortd)")
                             << ": " << blows);
    auto status = launcher.wait(30s);
    INFO(launcher.output());
    REQUIRE(status);
    CHECK_FALSE(status->signaled);
    CHECK(
        (status->code <= 10 || status->code == 130 || status->code == 137 || status->code == 143));
    bool only_cohortd = wait_until(
        [&] { return scratch.leftovers() == std::vector<pid_t>{cluster.daemon().pid()}; }, 10s);
    INFO("left behind:\n" << describe_processes(scratch.leftovers()));
    REQUIRE(only_cohortd);
  }
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

}  // namespace cohort::test

namespace cohort::test {

TEST_CASE("launch: the token and the forwarded secrets travel over ssh's stdin only",
          "[integration][launch][auth]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  std::string token_file = scratch.file("token");
  std::string user_token = "user-token-" + std::to_string(::getpid()) + "-0123456789";
  std::vector<std::string> token_flags;
  SECTION("generated by the launch") {}
  SECTION("given with --token-file") {
    std::ofstream(token_file) << user_token << "\n";
    ::chmod(token_file.c_str(), 0600);
    token_flags = {"--token-file", token_file};
  }
  // Forwarded secrets (HF_TOKEN by default, WANDB_API_KEY by -x) follow the token over stdin.
  auto env = launch_env();
  const std::string wandb = "wandb-" + std::to_string(::getpid()) + "-secret";
  const std::string hf = "hf-" + std::to_string(::getpid()) + "-secret";
  const std::string database = "db-" + std::to_string(::getpid()) + "-secret";
  env["WANDB_API_KEY"] = wandb;
  env["HF_TOKEN"] = hf;
  env["DB_PASS"] = database;  // no secret by its name: --secret makes it one
  ChildProcess launcher(launch_argv(hosts, with(with({"-v", "-H", host_list(hosts, 1), "-x",
                                                      "WANDB_API_KEY", "--secret", "DB_PASS"},
                                                     token_flags),
                                                with(dump_env_worker(), {"--hang"}))),
                        scratch.options(env));
  INFO(launcher.output());
  REQUIRE(
      wait_until([&] { return entries_starting_with(scratch.path(), "env_").size() == 2; }, 60s));
  for (int rank = 0; rank < 2; ++rank) {
    EnvDump dump = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
    CHECK(env_value(dump, "WANDB_API_KEY") == wandb);
    CHECK(env_value(dump, "HF_TOKEN") == hf);
    CHECK(env_value(dump, "DB_PASS") == database);
  }
  std::string endpoint = launched_endpoint(scratch, hosts.address(0));

  RunResult refused = status_without_token(scratch, endpoint);
  INFO(refused.out << refused.err);
  CHECK(refused.status == ExitStatus::exited(3));
  CHECK(contains(refused.err, "authentication failed"));

  // The launcher's own command line is the user's (with --token-file F); all below it count.
  std::string command_lines = run_processes(scratch, "cmdline", launcher.pid());
  std::string environments = run_processes(scratch, "environ");
  INFO(command_lines);
  CHECK(contains(command_lines, "--under-launch"));  // the remote agents were seen
  CHECK_FALSE(contains(command_lines, "--token-file"));
  CHECK_FALSE(contains(command_lines, "COHORT_TOKEN"));
  CHECK_FALSE(has_hex_run(command_lines, 32));
  CHECK_FALSE(contains(environments, "COHORT_TOKEN"));
  CHECK_FALSE(contains(command_lines, wandb));
  CHECK_FALSE(contains(command_lines, hf));
  CHECK_FALSE(contains(command_lines, database));
  // -v names what every host gets, the values never.
  CHECK(contains(launcher.err(), "variables set on every host: "));
  CHECK(contains(launcher.err(), "over stdin: DB_PASS HF_TOKEN WANDB_API_KEY\n"));
  CHECK_FALSE(contains(launcher.output(), wandb));
  CHECK_FALSE(contains(launcher.output(), hf));
  if (!token_flags.empty()) {
    CHECK_FALSE(contains(command_lines + environments, user_token));
    proto::StatusReply status = daemon_status(endpoint, token_file);
    REQUIRE(status.runs.size() == 1);
    CHECK(status.runs[0].phase == "running");
    CHECK(status.runs[0].nodes.size() == 2);
  }

  launcher.signal(SIGINT);
  auto status = launcher.wait(30s);
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(128 + SIGINT));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: cohort run --under-launch without its token line stops at once (exit 2)",
          "[integration][launch][auth]") {
  Scratch scratch;  // a test's child reads /dev/null: stdin ends before any line
  RunResult result =
      scratch.run({"--under-launch", "--no-python", kTestWorkerBin, "--dump-env", "env.json"});
  INFO(result.out << result.err);
  CHECK(result.status == ExitStatus::exited(2));
  CHECK(contains(result.err,
                 "cohort run: --under-launch: stdin ended before the token line (cohort launch "
                 "writes it)"));
  CHECK_FALSE(file_exists(scratch.file("env.json")));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch: --event-log gets the launch's daemon events and every host's agent events",
          "[integration][launch][events]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  std::string log = scratch.file("events.jsonl");
  RunResult result =
      launch(scratch, hosts,
             with({"-H", host_list(hosts, 1), "--rdzv-id", "logged", "--event-log", log},
                  {"--no-python", "/bin/true"}));
  INFO(result.out << result.err);
  REQUIRE(result.status == ExitStatus::exited(0));
  std::vector<std::string> daemon, agents;
  for (const nlohmann::json& event : cohort::read_event_file(log)) {
    CHECK(event["run"] == "logged");
    (event["source"] == "daemon" ? daemon : agents).push_back(event["event"]);
  }
  INFO(nlohmann::json(daemon).dump() << nlohmann::json(agents).dump());
  REQUIRE(daemon.size() >= 5);
  CHECK(daemon[0] == "run.created");
  CHECK(std::count(daemon.begin(), daemon.end(), "node.joined") == 2);
  CHECK(std::count(daemon.begin(), daemon.end(), "round.started") == 1);
  CHECK(std::count(daemon.begin(), daemon.end(), "run.completed") == 1);
  CHECK(std::count(agents.begin(), agents.end(), "agent.started") == 2);
  CHECK(std::count(agents.begin(), agents.end(), "agent.finished") == 2);
  CHECK(scratch.nothing_left());
}

// The console of `cohort launch` stops reading (a paused terminal, `| less`) for longer than the
// heartbeat timeout: the launcher's pumps hold back, ssh stops reading the remote agents' output,
// their pumps hold back and their workers wait to write; no io thread waits, so the daemon the
// launch hosts keeps every host, and every line comes out, in order, once the console reads.
TEST_CASE("launch: a console that stops reading loses no host and no line",
          "[integration][launch][output]") {
  require_ssh();
  Scratch scratch;
  SshHosts hosts(scratch, 2);
  constexpr int kLines = 150'000;  // about 5 MB a host: more than every buffer on the way
  std::vector<std::string> argv{"/bin/sh", "-c",
                                "{ \"$0\" \"$@\"; echo $? > " + scratch.file("launch_rc") +
                                    "; } | { sleep 5; exec cat > " + scratch.file("launch_out") +
                                    "; }"};
  for (const auto& word :
       launch_argv(hosts, {"-H", host_list(hosts, 1), "--max-restarts", "0", "--rdzv-conf",
                           "heartbeat_timeout=2,keep_alive_interval=0.2", "--no-python",
                           kTestWorkerBin, "--lines", std::to_string(kLines)})) {
    argv.push_back(word);
  }
  RunResult result = scratch.run_argv(argv, scratch.options(), 120s);
  INFO(result.out << result.err);
  REQUIRE(result.status.success());
  CHECK(read_file(scratch.file("launch_rc")) == "0\n");
  const std::regex line_pattern(R"(\[127\.0\.0\.\d:(\d)\]:line (\d+) of rank (\d))");
  std::vector<int> next(2, 0);
  int bad = 0;
  for (const std::string& line : split_lines(read_file(scratch.file("launch_out")))) {
    std::smatch match;
    if (!std::regex_match(line, match, line_pattern) || match[1] != match[3] ||
        std::stoi(match[1]) > 1 || std::stoi(match[2]) != next[std::stoi(match[1])]) {
      ++bad;
      continue;
    }
    ++next[std::stoi(match[1])];
  }
  CHECK(bad == 0);
  CHECK(next[0] == kLines);
  CHECK(next[1] == kLines);
  CHECK_FALSE(contains(result.err, "lost"));
  CHECK(scratch.nothing_left());
}

}  // namespace cohort::test
