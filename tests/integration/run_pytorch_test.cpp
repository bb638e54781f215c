// `cohort run` with real peers: a real PyTorch job (Debian's python3-torch 1.13, Gloo on CPU)
// trained end to end, and the worker environment compared variable by variable with the real
// torchrun of that PyTorch (tests/integration/torchrun_debian12.py).
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;
const std::string kTorchrun = std::string(kSourceDir) + "/tests/integration/torchrun_debian12.py";

}  // namespace

TEST_CASE("a real PyTorch all_reduce job runs under cohort", "[integration][run][pytorch]") {
  require_torch();
  Scratch scratch;
  // GLOO_SOCKET_IFNAME=lo keeps Gloo's pairs on the loopback interface.
  RunResult result = scratch.run_argv(
      loopback_only(
          Scratch::cohort_argv({"--standalone", "--nproc-per-node", "2",
                                std::string(kSourceDir) + "/examples/python/allreduce.py"})),
      scratch.options({{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}}), 120s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "[default0]:allreduce sum=3 world_size=2\n"));
  CHECK(scratch.nothing_left());
}

namespace {

// Every variable torchrun sets for a worker (DESIGN.md §3 item 2, torchrun-and-peers §1.2).
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
    "NCCL_ASYNC_ERROR_HANDLING",  // the older name, which 1.13 sets
    "OMP_NUM_THREADS",
    "TORCHELASTIC_SIGNALS_TO_HANDLE",
};

// The documented differences between cohort and the real torchrun of PyTorch 1.13, each with the
// check that replaces equality. Every other variable, torchrun's and any either launcher adds on
// top of the environment it was given, must be set by both with the same value.
//
// - MASTER_PORT: a free port picked at run time by each launcher; both must be a port number.
// - TORCHELASTIC_RUN_ID: --standalone makes a random uuid in both; both must look like one.
// - MASTER_ADDR: torchrun --standalone uses "localhost" (the FQDN with other backends); cohort
//   uses 127.0.0.1 (--local-addr/--master-addr when given). Both must be set.
// - TORCHELASTIC_ERROR_FILE: the base directory differs (torchrun: $TMPDIR/torchelastic_*/
//   <run id>_<random>; cohort: $TMPDIR/cohort_*/<run id>_<random>); both end in
//   attempt_0/<lr>/error.json.
// - TORCHELASTIC_USE_AGENT_STORE: cohort's workers connect to the run's worker store, which is
//   up before they start ("True", like PyTorch >= 2.5's torchrun with its shared store);
//   torchrun 1.13 lets worker rank 0 host the store ("False", cohort's --worker-store rank0).
//   Both must be one of the two.
// - TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCHELASTIC_SIGNALS_TO_HANDLE: PyTorch 2.x torchrun sets
//   them, 1.13 does not; cohort follows 2.x. When torchrun sets them, the values must agree.
// - NCCL_ASYNC_ERROR_HANDLING: cohort sets it ("1") for a Python worker whose torch is older than
//   2 (the next test), not for a --no-python worker like this one, which gets the 2.x names.
// - COHORT_HEARTBEAT_FD (cohort's heartbeat descriptor, a number) and PYTHONPATH (cohort adds
//   the directory of its cohort_heartbeat module at the end): cohort's own additions.
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
      CHECK(torchrun != "<unset>");
      CHECK_FALSE(torchrun.empty());
    } else if (name == "TORCHELASTIC_USE_AGENT_STORE") {
      CHECK((cohort == "True" || cohort == "False"));
      CHECK((torchrun == "True" || torchrun == "False"));
    } else if (name == "PYTHONPATH") {
      CHECK(ends_with(cohort, "/python"));
    } else if (name == "NCCL_ASYNC_ERROR_HANDLING") {
      CHECK(cohort == "<unset>");
      CHECK(torchrun == "1");
    } else if ((name == "TORCH_NCCL_ASYNC_ERROR_HANDLING" ||
                name == "TORCHELASTIC_SIGNALS_TO_HANDLE") &&
               torchrun == "<unset>") {
      CHECK(cohort ==
            (name == "TORCH_NCCL_ASYNC_ERROR_HANDLING" ? "1" : "SIGTERM,SIGINT,SIGHUP,SIGQUIT"));
    } else {
      CHECK(cohort == torchrun);
    }
  }
}

}  // namespace

TEST_CASE("workers get the same environment from cohort as from the real torchrun",
          "[integration][run][pytorch][compat]") {
  require_torch();
  require_prerequisite(file_exists(kTorchrun), kTorchrun + " (in the repository)");
  Scratch scratch;
  RunResult ours = scratch.run({"--standalone", "--nproc-per-node", "2", "--no-python",
                                "--max-restarts", "0", "--role", "trainer", kWorker, "--dump-env",
                                scratch.file("cohort_${local_rank}.json")});
  INFO("cohort:\n" << ours.out << ours.err);
  REQUIRE(ours.status.shell_code() == 0);
  ChildOptions options = scratch.options();
  RunResult theirs = scratch.run_argv(
      loopback_only({kPython, kTorchrun, "--standalone", "--nproc_per_node", "2", "--no_python",
                     "--max_restarts", "0", "--role", "trainer", "--monitor_interval", "0.1",
                     kWorker, "--dump-env", scratch.file("torchrun_${local_rank}.json")}),
      options, 120s);
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

namespace {

// A Python worker that writes its environment as JSON to the path it is given.
std::string env_script(const Scratch& scratch) {
  std::string script = scratch.file("dump_env.py");
  std::ofstream(script) << "import json, os, sys\n"
                           "json.dump(dict(os.environ), open(sys.argv[1], 'w'))\n";
  return script;
}

}  // namespace

TEST_CASE("NCCL's async error handling: both names for torch 1.13, the new one for --no-python",
          "[integration][run][pytorch]") {
  require_torch();
  Scratch scratch;
  RunResult python = scratch.run(
      {"--standalone", "--nproc-per-node", "1", env_script(scratch), scratch.file("python.json")},
      {{"PYTHON_EXEC", kPython}});
  INFO(python.out << python.err);
  REQUIRE(python.status.shell_code() == 0);
  EnvDump env = load_env(scratch.file("python.json"));
  CHECK(env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env_value(env, "NCCL_ASYNC_ERROR_HANDLING") == "1");  // the name 1.13 reads

  RunResult native = scratch.run({"--standalone", "--nproc-per-node", "1", "--no-python", kWorker,
                                  "--dump-env", scratch.file("native.json")});
  REQUIRE(native.status.shell_code() == 0);
  env = load_env(scratch.file("native.json"));
  CHECK(env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env_value(env, "NCCL_ASYNC_ERROR_HANDLING") == "<unset>");  // as for PyTorch 2.x

  RunResult mine = scratch.run({"--standalone", "--nproc-per-node", "1", "--no-python", kWorker,
                                "--dump-env", scratch.file("mine.json")},
                               {{"NCCL_ASYNC_ERROR_HANDLING", "0"}});
  REQUIRE(mine.status.shell_code() == 0);
  env = load_env(scratch.file("mine.json"));
  CHECK(env_value(env, "NCCL_ASYNC_ERROR_HANDLING") == "0");  // the user's, as it is
  CHECK(scratch.nothing_left());
}

TEST_CASE("one node's workers find their store at an explicit --master-port, as under torchrun",
          "[integration][run][pytorch]") {
  // torchrun's static rendezvous serves the workers' store on --master-port, and scripts connect
  // there themselves (init_method="tcp://ADDR:PORT"); cohort gave them a free port and nothing
  // listened on --master-port: such a worker waited until its timeout (30 min by default).
  require_torch();
  Scratch scratch;
  std::string script = scratch.file("tcp_init.py");
  std::ofstream(script) << "import datetime, os, torch\n"
                           "import torch.distributed as dist\n"
                           "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29511',\n"
                           "    rank=int(os.environ['RANK']), world_size=2,\n"
                           "    timeout=datetime.timedelta(seconds=20))\n"
                           "t = torch.tensor([float(dist.get_rank() + 1)])\n"
                           "dist.all_reduce(t)\n"
                           "restart = os.environ['TORCHELASTIC_RESTART_COUNT']\n"
                           "print('round', restart, 'MASTER_PORT=' + os.environ['MASTER_PORT'],\n"
                           "      'sum=%g' % t.item(), flush=True)\n"
                           "if restart == '0' and dist.get_rank() == 1:\n"
                           "    raise SystemExit(3)\n";
  // Rank 1 fails after the first round's all_reduce: the next round's store is on the port too.
  RunResult result = scratch.run_argv(
      loopback_only(Scratch::cohort_argv({"--nnodes", "1", "--master-port", "29511",
                                          "--nproc-per-node", "2", "--max-restarts", "1", script})),
      scratch.options({{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}}), 120s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  for (const char* line : {"[default0]:round 0 MASTER_PORT=29511 sum=3\n",
                           "[default1]:round 0 MASTER_PORT=29511 sum=3\n",
                           "[default0]:round 1 MASTER_PORT=29511 sum=3\n",
                           "[default1]:round 1 MASTER_PORT=29511 sum=3\n"}) {
    CHECK(contains(result.out, line));
  }
}

TEST_CASE("two static nodes' workers reach their store at --master-port, the daemon's port too",
          "[integration][run][pytorch]") {
  // Several nodes: the daemon listens on --master-port, the round's store on a port of its own
  // (MASTER_PORT); a worker that connects to --master-port itself is handed to that store, as
  // torchrun's rendezvous port serves its workers' store.
  require_torch();
  Scratch scratch;
  std::string script = scratch.file("tcp_init.py");
  std::ofstream(script)
      << "import datetime, os, torch\n"
         "import torch.distributed as dist\n"
         "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29512',\n"
         "    rank=int(os.environ['RANK']), world_size=2,\n"
         "    timeout=datetime.timedelta(seconds=20))\n"
         "t = torch.tensor([float(dist.get_rank() + 1)])\n"
         "dist.all_reduce(t)\n"
         "print('rank', dist.get_rank(), 'store elsewhere:',\n"
         "      os.environ['MASTER_PORT'] != '29512', 'sum=%g' % t.item(), flush=True)\n";
  // Both nodes in one private network namespace: node rank 1 first, rank 0 (the host) second.
  std::string nodes =
      "node() { \"$0\" run --nnodes 2 --node-rank $1 --master-addr 127.0.0.1 --master-port 29512 "
      "--nproc-per-node 1 \"$2\"; }\n"
      "node 1 \"$1\" & second=$!\n"
      "node 0 \"$1\"; first=$?\n"
      "wait $second; echo \"exits $first $?\"\n";
  RunResult result = scratch.run_argv(
      loopback_only({"/bin/sh", "-c", nodes, kCohortBin, script}),
      scratch.options({{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}}), 120s);
  INFO(result.out << result.err);
  CHECK(contains(result.out, "exits 0 0\n"));
  CHECK(contains(result.out, "[default0]:rank 0 store elsewhere: True sum=3\n"));
  CHECK(contains(result.out, "[default0]:rank 1 store elsewhere: True sum=3\n"));
  CHECK_FALSE(contains(result.err, "TCPStore client"));  // none was turned away
}

TEST_CASE("a TCPStore client at the rendezvous port is closed and the daemon says why",
          "[integration][store][pytorch]") {
  // cohortd, which may serve many runs, keeps its control port to itself: a script that connects
  // there itself waits until its timeout; the daemon says why at once.
  require_torch();
  Scratch scratch;
  std::string port_file = scratch.file("port");
  ChildOptions options = scratch.options();
  options.name = "cohortd";
  ChildProcess daemon({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file},
                      options);
  REQUIRE(wait_until([&] { return file_exists(port_file); }, 10s));
  std::string port = std::to_string(std::atoi(read_file(port_file).c_str()));
  RunResult client = scratch.run_argv({kPython, "-c",
                                       "import datetime, torch.distributed as dist\n"
                                       "dist.TCPStore('127.0.0.1', " +
                                           port + ", 1, False, datetime.timedelta(seconds=2))\n"},
                                      scratch.options(), 60s);
  INFO(client.out << client.err);  // 1.13's client may even think it connected
  bool said = wait_until(
      [&] {
        return contains(daemon.output(), "rendezvous: a PyTorch TCPStore client at 127.0.0.1");
      },
      5s);
  INFO(daemon.output());
  CHECK(said);
  CHECK(contains(daemon.output(), "connected to the rendezvous port " + port +
                                      " and was closed: the workers' store is "
                                      "MASTER_ADDR:MASTER_PORT, not this port"));
  CHECK(contains(daemon.output(), "give it init_method='env://' (the default)"));
}
