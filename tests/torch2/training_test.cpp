// The training examples on PyTorch 2.6 under cohort. examples/python/train_ddp.py on two nodes on
// loopback addresses (127.0.0.2, 127.0.0.3) with a cohortd on 127.0.0.1, one node SIGKILLed
// mid-run, and the survivor finishing from the lost node's checkpoint with no step lost or
// repeated (the scenario of the examples' node-loss test, tests/integration/training_support.hpp,
// with every node in the 2.6 root); and both examples (examples/libtorch built against Debian 13's
// libtorch-dev in the root) resuming after a worker failure without a deprecation warning or
// PyTorch's "destroy_process_group() was not called".
#include "tests/integration/training_support.hpp"
#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

namespace {

Example python_example() {
  return Example{"PyTorch 2.6",
                 {std::string(kSourceDir) + "/examples/python/train_ddp.py"},
                 {},
                 {"--fail-exit-code", "7"}};
}

}  // namespace

TEST_CASE("PyTorch 2.6: after a node loss the survivor finishes train_ddp.py at world size 2",
          "[torch2][examples][multinode]") {
  require_torch2();
  check_node_loss(python_example(), torch2_env(), in_torch2);
}

TEST_CASE("PyTorch 2.6: train_ddp.py resumes after a worker failure with no FutureWarning",
          "[torch2][examples]") {
  require_torch2();
  RunResult result = check_worker_failure(python_example(), torch2_env(), in_torch2);
  INFO(result.out << result.err);
  // torch.cuda.amp's GradScaler and autocast warn when they are made, enabled or not.
  CHECK_FALSE(contains(result.out + result.err, "FutureWarning"));
  CHECK_FALSE(contains(result.out + result.err, "deprecated"));
}

TEST_CASE("LibTorch 2.6: train_ddp built against libtorch-dev 2.6 resumes after a worker failure",
          "[torch2][examples][libtorch]") {
  require_torch2_libtorch();
  Scratch scratch;
  const std::string program = build_libtorch_example(scratch, scratch.file("build"), in_torch2);
  Example example{
      "LibTorch 2.6", {"--no-python", program}, {"--device", "cpu"}, {"--fail-signal", "SIGKILL"}};
  RunResult result = check_worker_failure(example, torch2_env(), in_torch2);
  INFO(result.out << result.err);
  CHECK(contains(result.out, "done: 30 steps"));
  CHECK_FALSE(contains(result.err, "destroy_process_group"));
  CHECK_FALSE(contains(result.err, "Warning"));
}
