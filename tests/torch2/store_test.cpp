// cohort's stores with PyTorch 2.6's own clients (the torch2 tier): every operation of the 2.6
// TCPStore client (is_master=False, use_libuv=False) against the worker store `cohort run` hosts
// and against `cohortd --tcpstore-port`, with the same checks run first against PyTorch 2.6's own
// server; and init_process_group("gloo") at 2 and 4 ranks through the hosted store, across a
// restart whose store is fresh.
#include <csignal>
#include <fstream>

#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

namespace {

const std::string kStoreClient = std::string(kSourceDir) + "/tests/torch2/store_client.py";

// What store_client.py prints when every operation answered right, on PyTorch 2.6 (which has no
// queue or list_keys operation yet; they would be tested where the client has them).
void check_all_operations(const std::string& output) {
  for (const char* line :
       {"set/get: ok", "add: ok", "compare_set: ok", "check: ok", "wait and timeouts: ok",
        "wake-ups from another client: ok", "multi_set/multi_get: ok", "append: ok",
        "prefix store: ok", "delete_key: ok", "8 concurrent clients: ok", "num_keys: ok (23)",
        "not in PyTorch 2.6.0+debian: queue_push queue_pop queue_len list_keys",
        "store_client: ok torch=2.6."}) {
    INFO(line);
    CHECK(contains(output, line));
  }
}

}  // namespace

TEST_CASE("PyTorch 2.6's own server answers the store checks (the reference)", "[torch2][store]") {
  require_torch2();
  Scratch scratch;
  RunResult result = scratch.run_argv(in_torch2({kPython2, kStoreClient, "ops-reference"}),
                                      scratch.options(), 180s);
  INFO(result.out << result.err);
  CHECK(result.status.success());
  check_all_operations(result.out);
}

TEST_CASE("the 2.6 TCPStore client: every operation on the worker store of `cohort run`",
          "[torch2][store]") {
  require_torch2();
  Scratch scratch;
  RunResult result = scratch.run_argv(
      in_torch2(Scratch::cohort_argv({"--standalone", "--nproc-per-node", "1", "--no-python",
                                      kPython2, kStoreClient, "ops-env"})),
      scratch.options(), 240s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  check_all_operations(result.out);
  CHECK(scratch.nothing_left());
}

TEST_CASE("the 2.6 TCPStore client: every operation on cohortd --tcpstore-port",
          "[torch2][store]") {
  require_torch2();
  Scratch scratch;
  std::string port_file = scratch.file("tcpstore_port");
  ChildOptions daemon_options = scratch.options();
  daemon_options.name = "cohortd";
  ChildProcess daemon(in_torch2({kCohortdBin, "--host", "127.0.0.1", "--port", "0",
                                 "--tcpstore-port", "0", "--tcpstore-port-file", port_file}),
                      daemon_options);
  REQUIRE(wait_until([&] { return file_exists(port_file); }, 20s));
  std::string port = std::to_string(std::atoi(read_file(port_file).c_str()));
  RunResult result = scratch.run_argv(in_torch2({kPython2, kStoreClient, "ops", "127.0.0.1", port}),
                                      scratch.options(), 240s);
  INFO(result.out << result.err << daemon.output());
  CHECK(result.status.success());
  check_all_operations(result.out);
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(10s) == cohort::ExitStatus::exited(143));
  CHECK(scratch.nothing_left());
}

TEST_CASE("PyTorch 2.6 workers reach their store at the c10d endpoint's port, as under torchrun",
          "[torch2][store][gloo]") {
  // torchrun 2.x serves the workers' store at its rendezvous endpoint, and scripts connect there
  // themselves (init_method="tcp://HOST:PORT"). cohort's daemon, hosted by the agent, hands such
  // a client to the round's store; it used to challenge it, and 2.6's client died at once
  // ("Ping failed, invalid nonce returned").
  require_torch2();
  Scratch scratch;
  std::string script = scratch.file("tcp_init.py");
  std::ofstream(script)
      << "import os, torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29513',\n"
         "    rank=int(os.environ['RANK']), world_size=2)\n"
         "t = torch.tensor([float(dist.get_rank() + 1)])\n"
         "dist.all_reduce(t)\n"
         "print('rank', dist.get_rank(), 'sum', t.item(), 'torch', torch.__version__,\n"
         "      'store elsewhere:', os.environ['MASTER_PORT'] != '29513', flush=True)\n";
  RunResult result =
      scratch.run_argv(loopback_only(in_torch2(Scratch::cohort_argv(
                           {"--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                            "--rdzv-endpoint", "127.0.0.1:29513", "--rdzv-id", "tcp", script}))),
                       scratch.options(torch2_env()), 240s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  for (const char* rank : {"0", "1"}) {
    CHECK(contains(result.out, std::string("rank ") + rank + " sum 3.0 torch 2.6."));
  }
  CHECK(contains(result.out, "store elsewhere: True"));
  CHECK_FALSE(contains(result.err, "TCPStore client"));  // none was turned away
  CHECK(scratch.nothing_left());
}

TEST_CASE("Gloo on PyTorch 2.6 through the hosted store at 2 and 4 ranks, a restart's is fresh",
          "[torch2][store][gloo]") {
  require_torch2();
  for (int workers : {2, 4}) {
    Scratch scratch;
    // store_rounds.py: round 0 writes a key per rank and fails once; round 1 must see none.
    RunResult result = scratch.run_argv(
        in_torch2(Scratch::cohort_argv(
            {"--standalone", "--nproc-per-node", std::to_string(workers), "--max-restarts", "1",
             std::string(kSourceDir) + "/tests/integration/store_rounds.py"})),
        scratch.options(torch2_env()), 300s);
    INFO(workers << " workers\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 0);
    CHECK(contains(result.out, "ok round=1 world=" + std::to_string(workers)));
    CHECK(contains(result.out, "torch=2.6."));
    CHECK_FALSE(contains(result.err, "sees a key of round 0"));
    CHECK(scratch.nothing_left());
  }
}
