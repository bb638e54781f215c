// examples/python/train_ddp.py on PyTorch 2.6 under cohort: two nodes on loopback addresses
// (127.0.0.2, 127.0.0.3) with a cohortd on 127.0.0.1, one node SIGKILLed mid-run, and the survivor
// finishing from the lost node's checkpoint with no step lost or repeated (the scenario of the
// examples' node-loss test, tests/integration/training_support.hpp, with every node in the 2.6
// root).
#include "tests/integration/training_support.hpp"
#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

TEST_CASE("PyTorch 2.6: after a node loss the survivor finishes train_ddp.py at world size 2",
          "[torch2][examples][multinode]") {
  require_torch2();
  Example example{"PyTorch 2.6",
                  {std::string(kSourceDir) + "/examples/python/train_ddp.py"},
                  {},
                  {"--fail-exit-code", "7"}};
  check_node_loss(example, torch2_env(), in_torch2);
}
