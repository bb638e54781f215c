#include "launcher/topology/visible_gpus.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("CUDA_VISIBLE_DEVICES filters the GPU count like CUDA", "[unit][launcher]") {
  CHECK(visible_gpu_count(4, nullptr) == 4);
  CHECK(visible_gpu_count(4, "") == 0);
  CHECK(visible_gpu_count(4, "0,2") == 2);
  CHECK(visible_gpu_count(4, "1,7,2") == 1);
  CHECK(visible_gpu_count(4, "-1") == 0);
  CHECK(visible_gpu_count(0, "GPU-6a2f,MIG-1234") == 2);
  CHECK(visible_gpu_count(2, " 0 , 1 ") == 2);
  CHECK(visible_gpu_count(0, "0") == 0);
}

TEST_CASE("CUDA_VISIBLE_DEVICES names the NVML indices a node's health checks look at",
          "[unit][launcher]") {
  using Indices = std::vector<int>;
  CHECK(visible_gpu_indices(3, nullptr) == Indices{0, 1, 2});
  CHECK(visible_gpu_indices(4, "3,1") == Indices{3, 1});
  CHECK(visible_gpu_indices(4, "1,7,2") == Indices{1});
  CHECK(visible_gpu_indices(4, "") == Indices{});
  CHECK_FALSE(visible_gpu_indices(4, "0,GPU-6a2f").has_value());
}
