// examples/libtorch built against a LibTorch without Gloo's headers, as the PyTorch wheels' is:
// Debian 12's libtorch-dev with an empty directory mounted over /usr/include/gloo in a private
// mount namespace (nothing changes on the host). It must compile, and refuse CPU training with a
// message that says why, before it connects to any store.
#include <unistd.h>

#include "tests/integration/training_support.hpp"

using namespace cohort::test;

namespace {

const std::string kGlooHeaders = "/usr/include/gloo";

void require_libtorch_and_gloo_headers() {
  require_prerequisite(file_exists("/usr/bin/cmake"), "cmake (scripts/setup installs it)");
  require_prerequisite(file_exists("/usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake"),
                       "LibTorch's CMake config (scripts/setup installs libtorch-dev)");
  require_prerequisite(file_exists(kGlooHeaders + "/algorithm.h"),
                       "Gloo's headers to hide (scripts/setup installs libgloo-dev)");
  require_prerequisite(::geteuid() == 0,
                       "root, for a private mount namespace (unshare -m) that hides " +
                           kGlooHeaders + " (scripts/setup's tests run as root)");
}

// `argv` with an empty directory mounted over Gloo's headers, in a mount namespace of its own.
NodeWrapper without_gloo_headers(const std::string& empty_dir) {
  return [empty_dir](const std::vector<std::string>& argv) {
    return concat(
        {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
         "mount --bind \"$1\" " + kGlooHeaders + " && shift && exec \"$@\"", "sh", empty_dir},
        argv);
  };
}

}  // namespace

TEST_CASE("LibTorch example: builds without Gloo headers and refuses --device cpu saying why",
          "[integration][examples][libtorch]") {
  require_libtorch_and_gloo_headers();
  Scratch scratch;
  const std::string empty = scratch.file("empty");
  REQUIRE(std::filesystem::create_directory(empty));
  const std::string program =
      build_libtorch_example(scratch, scratch.file("build"), without_gloo_headers(empty));

  // In a private network namespace: had it gone on, rank 0 would have hosted a TCPStore.
  RunResult cpu =
      scratch.run_argv(loopback_only({program, "--device", "cpu"}), scratch.options(), 60s);
  INFO(cpu.out << cpu.err);
  CHECK(cpu.status == cohort::ExitStatus::exited(2));
  CHECK(contains(cpu.err,
                 "train_ddp: training on the CPU needs Gloo, and this LibTorch has no "
                 "Gloo headers (gloo/algorithm.h; the PyTorch wheels ship none)"));
  // Debian's LibTorch has no NCCL either: nothing is left to train with.
  RunResult cuda =
      scratch.run_argv(loopback_only({program, "--device", "cuda"}), scratch.options(), 60s);
  INFO(cuda.out << cuda.err);
  CHECK(cuda.status == cohort::ExitStatus::exited(2));
  CHECK(contains(cuda.err, "built without NCCL and has no Gloo headers"));
  CHECK(scratch.nothing_left());
}
