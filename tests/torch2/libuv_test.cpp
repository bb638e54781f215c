// Debian 13's PyTorch 2.6 as shipped (the libuv hook of tests/torch2/site turned off with
// COHORT_TORCH_NO_LIBUV=0): why the hook exists, and the way that works without it (README,
// "PyTorch 2.6 from Debian 13").
#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

namespace {

const std::string kLibuvMissing =
    "use_libuv was requested but PyTorch was build without libuv support";

std::map<std::string, std::string> as_shipped(std::map<std::string, std::string> env) {
  env["COHORT_TORCH_NO_LIBUV"] = "0";
  return env;
}

}  // namespace

TEST_CASE("Debian's 2.6 as shipped: agent-store workers and torchrun fail for want of libuv",
          "[torch2][libuv]") {
  require_torch2();
  Scratch scratch;
  const std::string allreduce = std::string(kSourceDir) + "/examples/python/allreduce.py";
  RunResult workers = scratch.run_argv(
      in_torch2(Scratch::cohort_argv({"--standalone", "--nproc-per-node", "2", allreduce})),
      scratch.options(as_shipped(torch2_env())), 240s);
  INFO("cohort:\n" << workers.out << workers.err);
  CHECK(workers.status.shell_code() == 1);
  CHECK(contains(workers.err, "]:RuntimeError: " + kLibuvMissing));  // a worker line
  RunResult torchrun =
      scratch.run_argv(loopback_only(in_torch2({kTorchrun2, "--standalone", "--nproc_per_node", "1",
                                                "--no_python", "/bin/true"})),
                       scratch.options(as_shipped({})), 240s);
  INFO("torchrun:\n" << torchrun.out << torchrun.err);
  CHECK_FALSE(torchrun.status.success());
  CHECK(contains(torchrun.err, kLibuvMissing));
  CHECK(scratch.nothing_left());
}

TEST_CASE("Debian's 2.6 as shipped: --worker-store rank0 with USE_LIBUV=0 needs no hook",
          "[torch2][libuv]") {
  require_torch2();
  Scratch scratch;
  std::map<std::string, std::string> env = as_shipped(torch2_env());
  env["USE_LIBUV"] = "0";
  // Worker rank 0 hosts the store (TORCHELASTIC_USE_AGENT_STORE=False), the path of
  // _create_c10d_store that reads USE_LIBUV; it binds the wildcard address, hence the private
  // network namespace.
  RunResult result = scratch.run_argv(
      loopback_only(in_torch2(
          Scratch::cohort_argv({"--standalone", "--nproc-per-node", "2", "--worker-store", "rank0",
                                std::string(kSourceDir) + "/examples/python/allreduce.py"}))),
      scratch.options(env), 240s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "[default0]:allreduce sum=3 world_size=2\n"));
  CHECK(scratch.nothing_left());
}
