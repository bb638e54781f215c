// cohort next to the real torchrun of PyTorch 2.6 (Debian 13's /usr/bin/torchrun, as shipped plus
// the libuv hook of tests/torch2/site): the workers' environment compared variable by variable,
// and torchrun 2.6's own c10d rendezvous running through `cohortd --tcpstore-port`.
#include <csignal>
#include <set>

#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

namespace {

// Every variable torchrun 2.6 sets for a worker (local_elastic_agent.py), and those cohort adds
// for other releases (NCCL_ASYNC_ERROR_HANDLING for 1.13, unset here as in torchrun 2.6;
// TORCHELASTIC_SIGNALS_TO_HANDLE for 2.9+), plus OMP_NUM_THREADS, which both set when more than one
// worker runs.
const std::vector<std::string> kTorchrunVariables{
    "LOCAL_RANK",
    "RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_NAME",
    "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_ASYNC_ERROR_HANDLING",
    "TORCHELASTIC_SIGNALS_TO_HANDLE",
    "OMP_NUM_THREADS",
};

// The documented differences between cohort and torchrun 2.6 (README, "PyTorch 2.6 from
// Debian 13"), each with the check that replaces equality. Every other variable, torchrun's and
// any either launcher adds on top of the environment it was given, must be set by both with the
// same value; TORCHELASTIC_USE_AGENT_STORE ("True": the workers are clients of a store that is up
// before they start) and TORCH_NCCL_ASYNC_ERROR_HANDLING ("1") are among them.
//
// - MASTER_PORT: a free port picked at run time by each launcher; both must be a port number.
// - TORCHELASTIC_RUN_ID: --standalone makes a random uuid in both; both must look like one.
// - MASTER_ADDR: torchrun 2.6 --standalone says "localhost" (its rendezvous host's name with
//   other endpoints); cohort 127.0.0.1 (the address it reached the rendezvous by).
// - TORCHELASTIC_ERROR_FILE: the base directory differs (torchrun: $TMPDIR/torchelastic_*/
//   <run id>_<random>; cohort: $TMPDIR/cohort_*/<run id>_<random>); both end in
//   attempt_0/<lr>/error.json.
// - TORCHELASTIC_SIGNALS_TO_HANDLE: set by torchrun from 2.9 on (--signals-to-handle), not by
//   2.6. cohort sets its --signals-to-handle (default SIGTERM,SIGINT,SIGHUP,SIGQUIT).
// - COHORT_HEARTBEAT_FD (the worker's heartbeat descriptor, a small number) and PYTHONPATH
//   (cohort appends the directory of its cohort_heartbeat module): cohort's own, for hang
//   detection (README, "Hangs and stragglers").
void check_same_worker_env(const EnvDump& given, const EnvDump& ours, const EnvDump& theirs,
                           int local_rank) {
  const std::string lr = std::to_string(local_rank);
  for (const std::string& name : variables_to_compare(kTorchrunVariables, given, ours, theirs)) {
    const std::string cohort = env_value(ours, name), torchrun = env_value(theirs, name);
    INFO("local rank " << lr << ": " << name << " cohort='" << cohort << "' torchrun='" << torchrun
                       << "'");
    if (checked_difference_by_design(name, cohort, torchrun, local_rank)) continue;
    if (name == "MASTER_ADDR") {
      CHECK(cohort == "127.0.0.1");
      CHECK(torchrun == "localhost");
    } else if (name == "TORCHELASTIC_SIGNALS_TO_HANDLE") {
      CHECK(cohort == "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
      CHECK(torchrun == "<unset>");
    } else if (name == "PYTHONPATH") {
      CHECK(ends_with(cohort, "/python"));
      CHECK(torchrun == "<unset>");
    } else {
      CHECK(cohort == torchrun);
    }
  }
}

}  // namespace

TEST_CASE("workers get the same environment from cohort as from torchrun 2.6", "[torch2][compat]") {
  require_torch2();
  Scratch scratch;
  ChildOptions options = scratch.options();
  RunResult ours = scratch.run_argv(
      in_torch2(Scratch::cohort_argv({"--standalone", "--nproc-per-node", "2", "--no-python",
                                      "--max-restarts", "0", "--role", "trainer", kTestWorkerBin,
                                      "--dump-env", scratch.file("cohort_${local_rank}.json")})),
      options, 120s);
  INFO("cohort:\n" << ours.out << ours.err);
  REQUIRE(ours.status.shell_code() == 0);
  // torchrun's stores listen on the wildcard address: it runs in a private network namespace.
  RunResult theirs = scratch.run_argv(
      loopback_only(
          in_torch2({kTorchrun2, "--standalone", "--nproc_per_node", "2", "--no_python",
                     "--max_restarts", "0", "--role", "trainer", "--monitor_interval", "0.1",
                     kTestWorkerBin, "--dump-env", scratch.file("torchrun_${local_rank}.json")})),
      options, 240s);
  INFO("torchrun:\n" << theirs.out << theirs.err);
  REQUIRE(theirs.status.shell_code() == 0);

  const EnvDump given = Scratch::environment_of(options);
  std::vector<EnvDump> cohort_dumps, torchrun_dumps;
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    std::string lr = std::to_string(local_rank);
    cohort_dumps.push_back(load_env(scratch.file("cohort_" + lr + ".json")));
    torchrun_dumps.push_back(load_env(scratch.file("torchrun_" + lr + ".json")));
    check_same_worker_env(given, cohort_dumps.back(), torchrun_dumps.back(), local_rank);
    CHECK(env_value(cohort_dumps.back(), "__stdin") == env_value(torchrun_dumps.back(), "__stdin"));
  }
  // Within one run, the port and the run id are shared by every worker (in both launchers).
  for (const auto* dumps : {&cohort_dumps, &torchrun_dumps}) {
    CHECK(env_value((*dumps)[0], "MASTER_PORT") == env_value((*dumps)[1], "MASTER_PORT"));
    CHECK(env_value((*dumps)[0], "TORCHELASTIC_RUN_ID") ==
          env_value((*dumps)[1], "TORCHELASTIC_RUN_ID"));
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("torchrun 2.6's own c10d rendezvous runs through cohortd's TCPStore",
          "[torch2][store][torchrun]") {
  require_torch2();
  Scratch scratch;
  std::string port_file = scratch.file("tcpstore_port");
  ChildOptions daemon_options = scratch.options();
  daemon_options.name = "cohortd";
  ChildProcess daemon({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--tcpstore-port", "0",
                       "--tcpstore-port-file", port_file},
                      daemon_options);
  REQUIRE(wait_until([&] { return file_exists(port_file); }, 10s));
  const std::string port = std::to_string(std::atoi(read_file(port_file).c_str()));
  const std::string endpoint = "127.0.0.1:" + port;
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 0; node < 3; ++node) {
    // is_host=false: no agent hosts the store; all of them are clients of cohortd's.
    std::vector<std::string> argv =
        torchrun_c10d_argv({kTorchrun2}, 3, endpoint, scratch.file("torchrun_{RANK}.json"));
    ChildOptions options = scratch.options();
    options.name = "torchrun_" + std::to_string(node);
    agents.push_back(std::make_unique<ChildProcess>(in_torch2(argv), options));
  }
  for (auto& agent : agents) {
    auto status = agent->wait(240s);
    INFO(agent->output() << daemon.output());
    REQUIRE(status);
    CHECK(status->success());
  }
  std::set<std::string> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    EnvDump env = load_env(scratch.file("torchrun_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "3");
    CHECK(env_value(env, "GROUP_WORLD_SIZE") == "3");
    CHECK(env_value(env, "TORCHELASTIC_RUN_ID") == "external");
    ranks.insert(env_value(env, "GROUP_RANK"));
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2"});
  // The rendezvous state and round 0's keys are in cohortd's store (read by a 2.6 client).
  RunResult keys = scratch.run_argv(
      in_torch2({kPython2, "-c",
                 "import sys, torch.distributed as d\n"
                 "s = d.TCPStore('127.0.0.1', int(sys.argv[1]), is_master=False, use_libuv=False)\n"
                 "print('state', s.check(['torch.rendezvous.external']))\n"
                 "print('round 0', s.check(['torch.rendezvous.external.0/MASTER_ADDR']))\n",
                 port}),
      scratch.options(), 120s);
  INFO(keys.out << keys.err);
  CHECK(keys.status.success());
  CHECK(contains(keys.out, "state True\nround 0 True\n"));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s) == cohort::ExitStatus::exited(143));
  CHECK(scratch.nothing_left());
}
