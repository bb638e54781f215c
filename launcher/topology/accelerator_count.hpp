// --nproc-per-node with an accelerator's name (xpu, hpu, npu, mlu, musa): how many devices of that
// kind this node's workers may use, counted from the accelerator's visible-devices variable
// (ZE_AFFINITY_MASK for xpu, HABANA_VISIBLE_MODULES for hpu, ...), since cohort loads no vendor
// runtime. Pure functions; main thread at start.
#pragma once

#include <string>

namespace cohort {

/// The visible-devices variable of an accelerator name; empty for a name cohort does not know.
std::string accelerator_devices_variable(const std::string& name);

/// The accelerator names cohort knows, for messages: "xpu, hpu, ...".
std::string accelerator_names();

/// The devices a visible-devices value lists ("0,1" or "0.0,0.1": 2); 0 for an empty value.
int listed_device_count(const std::string& value);

}  // namespace cohort
