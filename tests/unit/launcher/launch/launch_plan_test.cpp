#include "launcher/launch/launch_plan.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <catch2/catch.hpp>

#include "common/exit_codes.hpp"
#include "common/text.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

struct Planned {
  LaunchOptions options;
  LaunchPlan plan;
};

Planned plan(std::vector<std::string> args, EnvVars env = {}, bool has_srun = false) {
  Planned planned;
  CLI::App app;
  add_launch_flags(app, planned.options);
  args.insert(args.begin(), "launch");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  REQUIRE(take_command(app.remaining(), planned.options.run).empty());
  LaunchContext context{std::move(env), "/work dir", "/opt/cohort/bin/cohort",
                        "/nonexistent", "login",     has_srun};
  planned.plan = plan_launch(app, planned.options, context);
  return planned;
}

bool has_problem(const LaunchPlan& plan, const std::string& start) {
  for (const auto& problem : plan.problems) {
    if (problem.rfind(start, 0) == 0) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("launch plan: each host runs cohort run with its slots, rank hint and the user's flags",
          "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "n1:2,n2:4", "--max-restarts", "3", "-vv", "--rdzv-id", "job7",
                       "--rdzv-conf", "join_timeout=30", "train.py", "--lr", "0.1"},
                      {{"NCCL_DEBUG", "INFO"}})
                     .plan;
  REQUIRE(p.problems.empty());
  CHECK(p.nnodes == "2");
  CHECK(p.min_nodes == 2);
  CHECK(p.run_id == "job7");
  CHECK(p.rdzv_host == "login");  // not local: this host's name
  CHECK(p.daemon.address == "0.0.0.0");
  RemoteCommand second = remote_command(p, 1, "login:4242");
  CHECK(second.working_dir == "/work dir");
  CHECK(second.argv == std::vector<std::string>{"/opt/cohort/bin/cohort",
                                                "run",
                                                "--under-launch",
                                                "--nnodes",
                                                "2",
                                                "--nproc-per-node",
                                                "4",
                                                "--rdzv-backend",
                                                "c10d",
                                                "--rdzv-endpoint",
                                                "login:4242",
                                                "--rdzv-id",
                                                "job7",
                                                "--local-addr",
                                                "n2",
                                                "--node-rank",
                                                "1",
                                                "--node-rank-hint",
                                                "--token-wait-ms",
                                                "25000",  // --connect-timeout 10 + 10 + 5 s
                                                "--rdzv-conf",
                                                "join_timeout=30",
                                                "--max-restarts",
                                                "3",
                                                "--verbose",
                                                "--verbose",
                                                "--",
                                                "train.py",
                                                "--lr",
                                                "0.1"});
  EnvVars env(second.env.begin(), second.env.end());
  CHECK(env == EnvVars{{"NCCL_DEBUG", "INFO"},
                       {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[n2:${rank}]:"}});
}

TEST_CASE("launch plan: loopback hosts use a loopback daemon, --nproc-per-node overrides slots",
          "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "127.0.0.2:2,127.0.0.3:2", "--nnodes", "1:2", "--nproc-per-node",
                       "gpu", "--exclude", "127.0.0.2:0", "x.py"})
                     .plan;
  REQUIRE(p.problems.empty());
  CHECK(p.rdzv_host == "127.0.0.1");
  CHECK(p.daemon.address == "127.0.0.1");
  CHECK(p.daemon.port == 0);
  CHECK(p.nnodes == "1:2");
  CHECK(p.min_nodes == 1);
  CHECK(p.run_id.rfind("launch-", 0) == 0);
  RemoteCommand first = remote_command(p, 0, "127.0.0.1:5");
  CHECK(first.argv[6] == "gpu");
  EnvVars env(first.env.begin(), first.env.end());
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "1");
}

TEST_CASE("launch plan: --rdzv-endpoint names a running cohortd", "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "a,b", "--rdzv-endpoint", "daemon:29400", "x.py"}).plan;
  REQUIRE(p.problems.empty());
  CHECK(p.rdzv_endpoint == "daemon:29400");
  CHECK(remote_command(p, 0, "daemon:29400").argv[10] == "daemon:29400");
}

TEST_CASE("launch plan: the run flags are checked in the launching environment",
          "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "a", "--store-ports", "29500-29509", "--store-quota", "16M",
                       "--store-budget", "64M", "--nproc-per-node", "gpu", "x.py"},
                      {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}})
                     .plan;
  REQUIRE(p.problems.empty());  // GPUs are counted on each host, not here
  CHECK(p.shutdown_timeout == std::chrono::seconds(7));
  CHECK(p.daemon.store_port_min == 29500);
  CHECK(p.daemon.store_port_max == 29509);
  CHECK(p.daemon.store_quota_bytes == (uint64_t{16} << 20));  // the launch's own daemon's store
  CHECK(p.daemon.store_budget_bytes == (uint64_t{64} << 20));
  CHECK(has_problem(plan({"-H", "a", "x.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}).plan,
                    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"));
}

TEST_CASE("launch plan: a number out of range names the range", "[unit][launch_plan]") {
  auto refusal = [](const char* flag, const char* value) -> std::string {
    try {
      plan({"-H", "a", flag, value, "x.py"});
    } catch (const CLI::ParseError& error) {
      return error.what();
    }
    return "";
  };
  CHECK(refusal("--ssh-port", "0") == "--ssh-port: expected a port from 1 to 65535, got '0'");
  CHECK(refusal("--host-retries", "-1") ==
        "--host-retries: expected a number of retries from 0 to 1000, got '-1'");
  CHECK(refusal("--np", "0") == "--np: expected a number of workers from 1 to 16777216, got '0'");
  CHECK(refusal("--connect-timeout", "x") ==
        "--connect-timeout: expected seconds from 1 to 3600, got 'x'");
  CHECK(refusal("--connect-timeout", "30").empty());
}

TEST_CASE("launch plan: what cannot work is refused, naming the flag", "[unit][launch_plan]") {
  CHECK(has_problem(plan({"x.py"}).plan, "-H, --hostfile: give the hosts"));
  CHECK(has_problem(plan({"-H", "a", "--hostfile", "f", "x.py"}).plan, "-H, --hostfile"));
  CHECK(has_problem(plan({"--hostfile", "/nonexistent/hf", "x.py"}).plan,
                    "--hostfile: cannot read '/nonexistent/hf'"));
  CHECK(has_problem(plan({"-H", "a,b", "--standalone", "x.py"}).plan,
                    "--standalone: cohort launch sets this"));
  CHECK(has_problem(plan({"-H", "a,b", "--node-rank", "1", "x.py"}).plan, "--node-rank:"));
  CHECK(has_problem(plan({"-H", "a,b", "--rdzv-backend", "static", "x.py"}).plan,
                    "--rdzv-backend: cohort launch uses c10d"));
  CHECK(has_problem(plan({"-H", "a,b", "--rdzv-fallback", "b", "x.py"}).plan,
                    "--rdzv-fallback: cohort launch hosts the rendezvous itself"));
  CHECK(has_problem(plan({"-H", "a,b", "--nnodes", "3", "x.py"}).plan,
                    "--nnodes 3: needs at least 3 hosts, and only 2 are given"));
  CHECK(has_problem(plan({"-H", "a", "--nnodes", "2", "x.py"}).plan,
                    "--nnodes 2: needs at least 2 hosts, and only 1 is given"));
  CHECK(has_problem(plan({"-H", "a,b", "--nnodes", "x", "x.py"}).plan, "--nnodes: expected"));
  // A malformed --nnodes is one problem, not two.
  LaunchPlan reversed = plan({"-H", "a", "--nnodes", "2:1", "x.py"}).plan;
  CHECK(reversed.problems.size() == 1);
  CHECK(has_problem(reversed, "--nnodes: expected N or MIN:MAX"));
  CHECK(has_problem(plan({"-H", "a", "--nproc-per-node", "lots", "x.py"}).plan,
                    "--nproc-per-node: expected"));
  CHECK(has_problem(plan({"-H", "a", "--max-restarts", "-1", "x.py"}).plan, "--max-restarts"));
  CHECK(has_problem(plan({"-H", "a", "-x", "NOPE", "x.py"}).plan, "-x NOPE: not set here"));
  CHECK(has_problem(plan({"-H", "a", "--env-file", "/nonexistent/e", "x.py"}).plan,
                    "--env-file: cannot read"));
  CHECK(
      has_problem(plan({"-H", "a", "--rdzv-endpoint", "d:29400", "--rdzv-host", "h", "x.py"}).plan,
                  "--rdzv-host: only for the embedded daemon"));
  CHECK(has_problem(plan({"-H", "a", "--rdzv-host", "x y", "x.py"}).plan,
                    "--rdzv-host: expected a host name or an address, got 'x y'"));
  CHECK_FALSE(
      has_problem(plan({"-H", "a", "--rdzv-host", "10.0.0.1", "x.py"}).plan, "--rdzv-host"));
}

TEST_CASE("launch plan: -H and --hostfile that cannot name the hosts are refused, not skipped",
          "[unit][launch_plan]") {
  EnvVars slurm{{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  // -H "$HOSTS" with HOSTS unset inside a job would otherwise launch on all of the job's hosts.
  CHECK(plan({"-H", "", "x.py"}, slurm).plan.problems ==
        std::vector<std::string>{
            "-H: empty; give the hosts (-H node1:4,node2:4), or leave -H out for the job's hosts"});
  CHECK(has_problem(plan({"-H", " ", "x.py"}, slurm).plan, "-H: empty"));
  CHECK(has_problem(plan({"--hostfile", "", "x.py"}, slurm).plan, "--hostfile: empty"));
  CHECK(has_problem(plan({"--hostfile", "a", "--hostfile", "b", "x.py"}).plan,
                    "--hostfile: given twice; give one hostfile"));
  // DeepSpeed's -H is a hostfile: a file of that name here is not taken for a host.
  CHECK(plan({"-H", "/etc/hostname", "x.py"}).plan.problems ==
        std::vector<std::string>{"-H: '/etc/hostname' is a file here: a hostfile is given with "
                                 "--hostfile (DeepSpeed's -H); a host of that name is written "
                                 "/etc/hostname:1"});
  CHECK(plan({"-H", "nosuchfile", "x.py"}).plan.problems.empty());
}

TEST_CASE("launch plan: -H given twice is one list, as Open MPI reads it", "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "a:2", "--host", "b", "-H", "c:3", "x.py"}).plan;
  REQUIRE(p.problems.empty());
  REQUIRE(p.hosts.size() == 3);
  CHECK(p.hosts[0].name == "a");
  CHECK(p.hosts[1].name == "b");
  CHECK(p.hosts[2].slots == 3);
  CHECK(has_problem(plan({"-H", "a", "-H", "a", "x.py"}).plan, "-H: host 'a' is listed twice"));
}

TEST_CASE("launch plan: with rank 0's store, localhost among other hosts is refused",
          "[unit][launch_plan]") {
  CHECK(
      plan({"-H", "localhost:2,b:2", "--worker-store", "rank0", "x.py"}).plan.problems ==
      std::vector<std::string>{
          "-H: localhost is this machine to itself only, and with worker rank 0's store the other "
          "hosts' workers would take it for themselves; name it by a name or address they "
          "reach"});
  EnvVars rank0{{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"}};
  CHECK(has_problem(plan({"-H", "b,u@127.0.0.1", "x.py"}, rank0).plan,
                    "-H: 127.0.0.1 is this machine"));
  // The daemon's store: each host's workers get the address their agent reached it by.
  CHECK(plan({"-H", "localhost:2,b:2", "x.py"}).plan.problems.empty());
  CHECK(
      plan({"-H", "b,127.0.0.1", "--worker-store", "daemon", "x.py"}, rank0).plan.problems.empty());
  CHECK(plan({"-H", "localhost,127.0.0.2,::1", "--worker-store", "rank0", "x.py"})
            .plan.problems.empty());
}

TEST_CASE("launch plan: the token stays off every command line", "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "a,b", "--token-file", "/secrets/token", "x.py"},
                      {{"COHORT_TOKEN", "never-forwarded-0123456789"}})
                     .plan;
  REQUIRE(p.problems.empty());
  RemoteCommand first = remote_command(p, 0, "login:4242");
  for (const std::string& word : first.argv) {
    CHECK(word != "--token-file");
    CHECK(word != "/secrets/token");
  }
  for (const auto& [name, value] : first.env) CHECK(name != "COHORT_TOKEN");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-H", "a", "-x", "COHORT_TOKEN=secret-0123456789abcdef", "x.py"},
           {"-H", "a", "-x", "COHORT_TOKEN", "x.py"}}) {
    CHECK(has_problem(plan(args, {{"COHORT_TOKEN", "x"}}).plan,
                      "-x, --env-file: COHORT_TOKEN would show on every host's command line"));
  }
}

TEST_CASE("launch plan: forwarded secrets stay off the command lines, for the stdin line",
          "[unit][launch_plan]") {
  // HF_TOKEN comes by default (the HF_ prefix), WANDB_API_KEY by -x, as the README shows.
  LaunchPlan p = plan({"-H", "a", "-x", "WANDB_API_KEY", "-x", "NCCL_IB_HCA=mlx5", "x.py"},
                      {{"HF_TOKEN", "hf_secret"}, {"WANDB_API_KEY", "wandb_secret"}})
                     .plan;
  REQUIRE(p.problems.empty());
  RemoteCommand command = remote_command(p, 0, "login:4242");
  std::string line = remote_shell_line(command);
  CHECK(line.find("secret") == std::string::npos);
  CHECK(line.find("NCCL_IB_HCA=mlx5") != std::string::npos);
  CHECK(secret_env(p) ==
        SecretVariables{{"HF_TOKEN", "hf_secret"}, {"WANDB_API_KEY", "wandb_secret"}});
  // What -v says: the names, never the values.
  CHECK(forwarded_names(p) == "NCCL_IB_HCA; over stdin: HF_TOKEN WANDB_API_KEY");
  CHECK(forwarded_names(plan({"-H", "a", "x.py"}).plan) == "none");
  CHECK(forwarded_names(plan({"-H", "a", "x.py"}, {{"HF_TOKEN", "t"}}).plan) ==
        "over stdin: HF_TOKEN");
  // --secret sends any variable so, whatever its name.
  LaunchPlan named = plan({"-H", "a", "--secret", "DB_PASS", "--secret", "URL=https://u:p@h", "-x",
                           "URL=visible", "x.py"},
                          {{"DB_PASS", "pw-secret"}})
                         .plan;
  REQUIRE(named.problems.empty());
  CHECK(secret_env(named) == SecretVariables{{"DB_PASS", "pw-secret"}, {"URL", "https://u:p@h"}});
  CHECK(remote_shell_line(remote_command(named, 0, "login:4242")).find("DB_PASS") ==
        std::string::npos);
  CHECK(remote_shell_line(remote_command(named, 0, "login:4242")).find("URL") == std::string::npos);
  CHECK(plan({"-H", "a", "--secret", "NOPE", "x.py"}).plan.problems ==
        std::vector<std::string>{"--secret NOPE: not set here (use --secret NOPE=value)"});
  CHECK(plan({"-H", "a", "--secret", "a b", "x.py"}).plan.problems ==
        std::vector<std::string>{"--secret: expected NAME or NAME=value, got 'a b'"});
  // More than fits in the stdin line: refused before anything starts.
  CHECK(has_problem(plan({"-H", "a", "x.py"}, {{"HF_TOKEN", std::string(20000, 's')}}).plan,
                    "-x, --env-file: the forwarded secrets (40014 bytes in hex) go over ssh's "
                    "stdin, which takes at most 32768 bytes"));
}

TEST_CASE("launch exit code: the root cause, else success, else every host was lost",
          "[unit][launch_plan]") {
  CHECK(launch_exit_code({0, 0, 0}) == 0);
  CHECK(launch_exit_code({255, 7, 7}) == 7);
  CHECK(launch_exit_code({255, 0, 0}) == 0);
  CHECK(launch_exit_code({130, 130}) == 130);
  CHECK(launch_exit_code({255, 255}) == kExitUnreachable);
}

TEST_CASE("launch plan: without -H or --hostfile the batch allocation gives the hosts",
          "[unit][launch_plan]") {
  EnvVars slurm{{"SLURM_JOB_NODELIST", "gpu-[1-2]"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}};
  LaunchPlan p = plan({"--exclude", "gpu-2:3", "x.py"}, slurm).plan;
  REQUIRE(p.problems.empty());
  REQUIRE(p.hosts.size() == 2);
  CHECK(p.hosts_source == "the Slurm allocation (SLURM_JOB_NODELIST=gpu-[1-2])");
  CHECK(p.scheduler == "Slurm");
  CHECK(p.nnodes == "2");
  CHECK(remote_command(p, 0, "login:1").argv[6] == "4");
  CHECK(remote_command(p, 1, "login:1").argv[6] == "3");

  LaunchPlan given = plan({"-H", "a:2", "x.py"}, slurm).plan;
  REQUIRE(given.problems.empty());
  CHECK(given.hosts.size() == 1);
  CHECK(given.hosts_source == "-H");
  CHECK(given.scheduler.empty());

  CHECK(has_problem(plan({"x.py"}, {{"SLURM_JOB_NODELIST", "n[1-"}}).plan,
                    "SLURM_JOB_NODELIST: 'n[1-' is not a Slurm host list of at most"));
  CHECK(has_problem(plan({"x.py"}).plan,
                    "-H, --hostfile: give the hosts (-H node1:4,node2:4 or "
                    "--hostfile FILE), or run cohort launch inside a Slurm"));
}

namespace {

std::vector<std::string> worker_counts(const LaunchPlan& p) {
  std::vector<std::string> counts;
  for (size_t i = 0; i < p.hosts.size(); ++i) counts.push_back(remote_command(p, i, "d:1").argv[6]);
  return counts;
}

}  // namespace

TEST_CASE("launch plan: mpirun's -np fills the hosts' slots in order, -N sets each host's",
          "[unit][launch_plan]") {
  LaunchPlan filled = plan({"--np", "6", "-H", "a:4,b:4,c:4", "x.py"}).plan;
  REQUIRE(filled.problems.empty());
  CHECK(worker_counts(filled) == std::vector<std::string>{"4", "2"});
  CHECK(filled.nnodes == "2");

  LaunchPlan kept = plan({"-n", "3", "-H", "a:4,b:4", "--exclude", "a:0", "x.py"}).plan;
  REQUIRE(kept.problems.empty());
  CHECK(worker_counts(kept) == std::vector<std::string>{"3"});
  CHECK(visible_devices(kept.hosts[0]) == "1,2,3");

  LaunchPlan per_host = plan({"--np", "8", "--npernode", "4", "-H", "a,b,c", "x.py"}).plan;
  REQUIRE(per_host.problems.empty());
  CHECK(worker_counts(per_host) == std::vector<std::string>{"4", "4"});
  CHECK(per_host.nnodes == "2");
  LaunchPlan ppn = plan({"--ppn", "2", "--np", "4", "-H", "a,b", "x.py"}).plan;
  CHECK(ppn.nproc_per_node == "2");
  CHECK(ppn.run_flags.empty());  // the hosts' cohort run gets --nproc-per-node, not these

  CHECK(has_problem(plan({"--np", "9", "-H", "a:4,b:4", "x.py"}).plan,
                    "-np 9: the hosts have 8 slots"));
  CHECK(has_problem(plan({"--np", "6", "-N", "4", "-H", "a,b", "x.py"}).plan,
                    "-np 6: not a multiple of the 4 workers per host"));
  CHECK(has_problem(plan({"--np", "12", "-N", "4", "-H", "a,b", "x.py"}).plan,
                    "-np 12: needs 3 hosts of 4 workers, and only 2 are given"));
  CHECK(has_problem(plan({"--np", "4", "--nproc-per-node", "gpu", "-H", "a,b", "x.py"}).plan,
                    "-np: needs a number of workers per host"));
  CHECK(has_problem(plan({"--np", "4", "--nnodes", "2", "-H", "a:2,b:2", "x.py"}).plan,
                    "-np: it sets how many hosts take part; leave out --nnodes"));
  CHECK(has_problem(plan({"-N", "2", "--nproc-per-node", "2", "-H", "a", "x.py"}).plan,
                    "-N, --npernode: --nproc-per-node by another name"));
  // More workers than the slots --include kept: two would see no device.
  CHECK(has_problem(plan({"-H", "a:4", "--include", "a:0,1", "-N", "4", "x.py"}).plan,
                    "--nproc-per-node 4: a keeps 2 slots after --include/--exclude"));
  CHECK(plan({"-H", "a:4", "--include", "a:0,1", "-N", "2", "x.py"}).plan.problems.empty());
  CHECK(plan({"-H", "a:4", "--include", "a:0,1", "--nproc-per-node", "gpu", "x.py"})
            .plan.problems.empty());
}

TEST_CASE("launch plan: a run flag given twice is the last one and only it is forwarded",
          "[unit][launch_plan]") {
  Planned planned =
      plan({"-H", "a:2,b:2", "--role", "x", "--role", "y", "--max_restarts=1", "--max-restarts=0",
            "--nproc-per-node", "2", "--nproc-per-node", "1", "x.py"});
  const LaunchPlan& p = planned.plan;
  REQUIRE(p.problems.empty());
  CHECK(planned.options.run.role == "y");
  CHECK(p.nproc_per_node == "1");
  CHECK(p.run_flags == std::vector<std::string>{"--max-restarts", "0", "--role", "y"});
}

TEST_CASE("launch plan: each host's cohort run gets the script's words as they are after --",
          "[unit][launch_plan]") {
  using Words = std::vector<std::string>;
  for (auto [given, sent] : std::vector<std::pair<Words, Words>>{
           {{"x.py", "--", "--lr", "1"}, {"--", "x.py", "--lr", "1"}},
           {{"x.py", "--", "--", "b"}, {"--", "x.py", "--", "b"}},  // the second "--" is x.py's
           {{"--", "-odd.py", "a"}, {"--", "-odd.py", "a"}}}) {
    given.insert(given.begin(), {"-H", "a,b"});
    LaunchPlan p = plan(given).plan;
    REQUIRE(p.problems.empty());
    Words argv = remote_command(p, 1, "login:4242").argv;
    INFO(join(argv, " "));
    REQUIRE(argv.size() > sent.size());
    CHECK(Words(argv.end() - static_cast<long>(sent.size()), argv.end()) == sent);
  }
}

TEST_CASE("launch plan: inside a Slurm job its own hosts start as job steps, others over ssh",
          "[unit][launch_plan]") {
  EnvVars job{{"SLURM_JOB_ID", "42"},
              {"SLURM_JOB_NODELIST", "gpu-[1-2]"},
              {"SLURM_TASKS_PER_NODE", "8(x2)"}};
  CHECK(plan({"x.py"}, job, true).plan.transport == Transport::Srun);
  CHECK(plan({"x.py"}, job, false).plan.transport == Transport::Ssh);  // no srun in PATH
  CHECK(plan({"-H", "a,b", "x.py"}, job, true).plan.transport == Transport::Ssh);
  CHECK(plan({"--launcher", "ssh", "x.py"}, job, true).plan.transport == Transport::Ssh);
  EnvVars copied_list{{"SLURM_JOB_NODELIST", "gpu-[1-2]"}};  // a node list, but not in the job
  CHECK(plan({"x.py"}, copied_list, true).plan.transport == Transport::Ssh);

  LaunchPlan chosen = plan({"--launcher", "srun", "-H", "gpu-1", "--launcher-args",
                            "--gres=gpu:8  --mem=0", "x.py"},
                           job)
                          .plan;
  REQUIRE(chosen.problems.empty());
  CHECK(chosen.transport == Transport::Srun);
  CHECK(chosen.srun.extra_args == std::vector<std::string>{"--gres=gpu:8", "--mem=0"});
  CHECK(chosen.run_flags.empty());  // --launcher and --launcher-args are the launch's own

  CHECK(has_problem(plan({"--launcher", "srun", "-H", "a", "x.py"}).plan,
                    "--launcher srun: needs a Slurm job (no SLURM_JOB_ID here)"));
  CHECK(has_problem(plan({"--launcher", "pdsh", "-H", "a", "x.py"}).plan,
                    "--launcher: expected ssh or srun, got 'pdsh'"));
  CHECK(has_problem(plan({"--ssh-port", "2222", "x.py"}, job, true).plan,
                    "--ssh-port: this launch starts its hosts with srun, not ssh"));
  CHECK(has_problem(plan({"--ssh-option", "User=me", "x.py"}, job, true).plan,
                    "--ssh-option: this launch starts its hosts with srun"));
  CHECK(has_problem(plan({"--launcher-args", "--mem=0", "-H", "a", "x.py"}).plan,
                    "--launcher-args: words for srun (--launcher srun)"));
}

TEST_CASE("launch plan: hosts that are all this machine by name start without ssh",
          "[unit][launch_plan]") {
  CHECK(plan({"-H", "localhost:2", "x.py"}).plan.transport == Transport::Local);
  CHECK(plan({"-H", "127.0.0.1", "x.py"}).plan.transport == Transport::Local);
  CHECK(plan({"-H", "other@localhost", "x.py"}).plan.transport == Transport::Ssh);  // their login
  // Another loopback address may be a host of its own (a container, a test's sshd).
  CHECK(plan({"-H", "127.0.0.2", "x.py"}).plan.transport == Transport::Ssh);
  CHECK(plan({"-H", "localhost,gpu-1", "x.py"}).plan.transport == Transport::Ssh);
  CHECK(plan({"--launcher", "ssh", "-H", "localhost", "x.py"}).plan.transport == Transport::Ssh);
  EnvVars job{{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", "localhost"}};
  CHECK(plan({"x.py"}, job, true).plan.transport == Transport::Srun);  // a job's own node
  LaunchPlan local = plan({"-H", "localhost", "--host-retries", "2", "x.py"}).plan;
  CHECK(has_problem(local,
                    "--host-retries: this launch starts its hosts, this machine, without "
                    "ssh (--launcher ssh to use ssh)"));
  CHECK(local.host_retries == 0);
}

TEST_CASE("launch plan: --launcher-args are split as a shell splits them", "[unit][launcher]") {
  EnvVars job{{"SLURM_JOB_ID", "7"}};
  LaunchPlan quoted = plan({"--launcher", "srun", "-H", "gpu-1", "--launcher-args",
                            "--comment='two words' --mem=0", "x.py"},
                           job)
                          .plan;
  REQUIRE(quoted.problems.empty());
  CHECK(quoted.srun.extra_args == std::vector<std::string>{"--comment=two words", "--mem=0"});
  CHECK(has_problem(
      plan({"--launcher", "srun", "-H", "gpu-1", "--launcher-args", "--comment='two words", "x.py"},
           job)
          .plan,
      "--launcher-args: a ' is not closed (the words are split as a shell splits"));
}

TEST_CASE("launch plan: the steps of a job with GPUs per task ask for those of all their slots",
          "[unit][launch_plan]") {
  EnvVars job{{"SLURM_JOB_ID", "42"},
              {"SLURM_JOB_NODELIST", "gpu-[1-2]"},
              {"SLURM_TASKS_PER_NODE", "2(x2)"},
              {"SLURM_GPUS_PER_TASK", "1"}};
  LaunchPlan steps = plan({"x.py"}, job, true).plan;
  REQUIRE(steps.problems.empty());
  REQUIRE(steps.transport == Transport::Srun);
  REQUIRE(steps.srun.gpus_per_task);
  CHECK(steps.srun.gpus_per_task->count == 1);
  REQUIRE(steps.hosts.size() == 2);
  CHECK(srun_argv(steps.srun, steps.hosts[0].name, steps.hosts[0].slots, "line")[9] ==
        "--gres=gpu:2");
  // Hosts of the user's own (-H) have the user's slots, not the job's tasks: left alone.
  CHECK_FALSE(
      plan({"--launcher", "srun", "-H", "gpu-1:4", "x.py"}, job, true).plan.srun.gpus_per_task);
}

TEST_CASE("launch plan: a lost host is started again --host-retries times, as part of the job",
          "[unit][launch_plan]") {
  LaunchPlan p = plan({"-H", "a,b,c", "--nnodes", "2:3", "x.py"}).plan;
  REQUIRE(p.problems.empty());
  CHECK(p.host_retries == 10);
  CHECK(plan({"-H", "a,b", "--host-retries", "0", "x.py"}).plan.host_retries == 0);
  CHECK(plan({"-H", "a,b", "--host-retries", "3", "x.py"}).plan.run_flags.empty());  // its own

  // Started again, the agent says how old the job is, so that it hears how a run that ended
  // meanwhile ended; its first start says nothing.
  std::vector<std::string> again = remote_command(p, 2, "login:4242", 61500ms).argv;
  auto flag = std::find(again.begin(), again.end(), "--launched-ms-ago");
  REQUIRE(flag != again.end());
  CHECK(*(flag + 1) == "61500");
  std::vector<std::string> first = remote_command(p, 2, "login:4242").argv;
  CHECK(std::find(first.begin(), first.end(), "--launched-ms-ago") == first.end());

  CHECK(rejoin_pause(1) == 1s);
  CHECK(rejoin_pause(2) == 2s);
  CHECK(rejoin_pause(5) == 16s);
  CHECK(rejoin_pause(6) == 30s);
  CHECK(rejoin_pause(1000) == 30s);
  // A host that ran 10 minutes since its last start has its retries back; a shorter run does not.
  CHECK(host_retries_used(7, 599s) == 7);
  CHECK(host_retries_used(7, 600s) == 0);
  CHECK(host_retries_used(0, 5s) == 0);

  EnvVars job{{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", "gpu-[1-2]"}};
  CHECK(plan({"x.py"}, job, true).plan.host_retries == 0);  // a job step is not started again
  CHECK(has_problem(plan({"--host-retries", "2", "x.py"}, job, true).plan,
                    "--host-retries: this launch starts its hosts with srun, not ssh"));
  CHECK(has_problem(plan({"-H", "a", "--launched-ms-ago", "5", "x.py"}).plan,
                    "--launched-ms-ago: cohort launch sets this"));
  CHECK(has_problem(plan({"-H", "a", "--token-wait-ms", "5", "x.py"}).plan,
                    "--token-wait-ms: cohort launch sets this"));
}

TEST_CASE("launch plan: each agent waits for its token as long as the launch waits for them all",
          "[unit][launch]") {
  LaunchPlan p = plan({"-H", "a,b", "--connect-timeout", "30", "x.py"}).plan;
  REQUIRE(p.problems.empty());
  CHECK(ready_limit(p) == std::chrono::seconds(40));
  std::vector<std::string> argv = remote_command(p, 0, "login:1").argv;
  auto flag = std::find(argv.begin(), argv.end(), "--token-wait-ms");
  REQUIRE(flag != argv.end());
  CHECK(*(flag + 1) == "45000");
}

TEST_CASE("launch plan: a flag turned off is not forwarded, one turned on is", "[unit][launch]") {
  auto forwarded = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"-H", "a"});
    args.push_back("x.py");
    Planned planned = plan(args);
    REQUIRE(planned.plan.problems.empty());
    std::vector<std::string> argv = remote_command(planned.plan, 0, "login:1").argv;
    CHECK(*(argv.end() - 2) == "--");  // then the script
    return std::vector<std::string>(std::find(argv.begin(), argv.end(), "--token-wait-ms") + 2,
                                    argv.end() - 2);
  };
  CHECK(forwarded({"--raw-output=false"}).empty());
  CHECK(forwarded({"--no-python=0", "--insecure=no"}).empty());
  CHECK(forwarded({"--raw-output"}) == std::vector<std::string>{"--raw-output"});
  CHECK(forwarded({"--raw-output=true"}) == std::vector<std::string>{"--raw-output"});
  CHECK(forwarded({"-v", "-v"}) == std::vector<std::string>{"--verbose", "--verbose"});
}

TEST_CASE("launch plan: every flag of cohort launch has both spellings, as its --help says",
          "[unit][launch_plan]") {
  LaunchOptions options;
  CLI::App app;
  add_launch_flags(app, options);
  int checked = 0;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      if (name.find('-') == std::string::npos) continue;
      std::string underscored = name;
      std::replace(underscored.begin(), underscored.end(), '-', '_');
      INFO(name);
      CHECK(option->check_lname(underscored));
      ++checked;
    }
  }
  CHECK(checked > 40);
  CHECK(app.get_footer().find("(--ssh-port, --ssh_port)") != std::string::npos);
  LaunchPlan p = plan({"-H", "a", "--ssh_port", "2222", "--launcher_args", "x", "t.py"}).plan;
  CHECK(p.ssh.port == 2222);
}
