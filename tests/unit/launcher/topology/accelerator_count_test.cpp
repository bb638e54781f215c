#include "launcher/topology/accelerator_count.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("each accelerator is counted from its visible-devices variable", "[unit][launcher]") {
  CHECK(accelerator_devices_variable("xpu") == "ZE_AFFINITY_MASK");
  CHECK(accelerator_devices_variable("hpu") == "HABANA_VISIBLE_MODULES");
  CHECK(accelerator_devices_variable("npu") == "ASCEND_RT_VISIBLE_DEVICES");
  CHECK(accelerator_devices_variable("tpu").empty());
  CHECK(listed_device_count("0,1,2") == 3);
  CHECK(listed_device_count("0.0, 0.1") == 2);
  CHECK(listed_device_count("") == 0);
  CHECK(accelerator_names().find("xpu") != std::string::npos);
}
