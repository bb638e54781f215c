// The torch2 tier's way into PyTorch 2.6: Debian 13's python3-torch in a root that scripts/setup
// makes (default /var/lib/cohort/trixie-torch, COHORT_TORCH2_ROOT elsewhere), where
// scripts/in-torch2 runs a command with this checkout, /tmp and the host's network, process ids and
// names. cohort's own binaries run there unchanged, so a test runs the real cohort, cohortd and
// test_worker next to the real PyTorch 2.6 and its torchrun. A missing or stale root fails the
// test, naming scripts/setup; nothing is skipped. Test thread only.
#pragma once

#include <filesystem>

#include "tests/integration/integration_support.hpp"

namespace cohort::test {

inline const std::string kInTorch2 = std::string(kSourceDir) + "/scripts/in-torch2";
// Paths inside the root.
inline const std::string kPython2 = "/usr/bin/python3";
inline const std::string kTorchrun2 = "/usr/bin/torchrun";

inline std::string torch2_root() {
  const char* root = std::getenv("COHORT_TORCH2_ROOT");
  return root != nullptr && *root != '\0' ? root : "/var/lib/cohort/trixie-torch";
}

/// `argv` as a command that runs inside the root (the same process: in-torch2 execs it).
inline std::vector<std::string> in_torch2(const std::vector<std::string>& argv) {
  std::vector<std::string> wrapped{kInTorch2};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

/// What is wrong with the root, or "" when it is complete, carries this checkout's libuv hook
/// (tests/torch2/site, which scripts/setup copies there) and imports torch 2.6.
inline std::string torch2_problem() {
  const std::string root = torch2_root();
  const std::string setup = " (scripts/setup makes it and keeps it current)";
  if (!file_exists(root + "/.cohort-torch2-ready")) {
    return "the PyTorch 2.6 root " + root + setup;
  }
  const std::string hook = "cohort_torch_no_libuv.py";
  const std::string ours = read_file(std::string(kSourceDir) + "/tests/torch2/site/" + hook);
  bool current = false;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/usr/local/lib", error)) {
    std::string installed = entry.path().string() + "/dist-packages/" + hook;
    if (file_exists(installed) && read_file(installed) == ours) current = true;
  }
  if (!current) return "this checkout's tests/torch2/site/" + hook + " in " + root + setup;
  Scratch scratch;
  try {
    RunResult result = scratch.run_argv(
        in_torch2({kPython2, "-c",
                   "import torch, torch.distributed as d\n"
                   "print('torch', torch.__version__, d.TCPStore._cohort_no_libuv)"}),
        scratch.options(), 180s);
    if (result.status.success() && contains(result.out, "torch 2.6.") &&
        contains(result.out, " True")) {
      return "";
    }
    return "torch 2.6 with the libuv hook in " + root + setup + "; it said:\n" + result.out +
           result.err;
  } catch (const std::exception& e) {
    return "a working " + kInTorch2 + ": " + e.what();
  }
}

inline void require_torch2() {
  static const std::string problem = torch2_problem();
  require_prerequisite(problem.empty(), problem);
}

/// require_torch2(), and Debian 13's libtorch-dev, cmake and g++ in the root (for
/// examples/libtorch); their marker is the one scripts/setup writes once it has added them.
inline void require_torch2_libtorch() {
  require_torch2();
  const std::string marker = torch2_root() + "/.cohort-torch2-libtorch-dev";
  require_prerequisite(file_exists(marker), "libtorch-dev, cmake and g++ in the PyTorch 2.6 root " +
                                                torch2_root() + " (scripts/setup adds them)");
}

/// Debian 13's python3 (torch 2.6) for scripts, and Gloo on loopback only.
inline std::map<std::string, std::string> torch2_env() {
  return {{"PYTHON_EXEC", kPython2}, {"GLOO_SOCKET_IFNAME", "lo"}};
}

}  // namespace cohort::test
