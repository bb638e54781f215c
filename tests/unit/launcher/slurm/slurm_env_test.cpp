#include <catch2/catch.hpp>

#include "launcher/slurm/slurm_env.hpp"

using namespace cohort;

TEST_CASE("outside a Slurm step nothing is taken", "[unit][launcher][slurm]") {
  CHECK_FALSE(slurm_defaults({}));
  CHECK_FALSE(slurm_defaults({{"SLURM_JOB_ID", "7"}}));  // a batch script, not an srun step
}

TEST_CASE("a Slurm step gives nodes, run id, endpoint, rank hint and GPUs",
          "[unit][launcher][slurm]") {
  auto defaults = slurm_defaults({{"SLURM_JOB_ID", "1234"},
                                  {"SLURM_STEP_ID", "0"},
                                  {"SLURM_JOB_NUM_NODES", "4"},
                                  {"SLURM_JOB_NODELIST", "gpu-[01-04,07],login1"},
                                  {"SLURM_NODEID", "2"},
                                  {"SLURM_GPUS_ON_NODE", "8"}});
  REQUIRE(defaults);
  CHECK(defaults->nnodes->value == "4");
  CHECK(defaults->nnodes->source == "SLURM_JOB_NUM_NODES=4");
  CHECK(defaults->rdzv_id->value == "slurm-1234.0");
  CHECK(defaults->rdzv_endpoint->value == "gpu-01:29634");
  CHECK(defaults->node_rank->value == "2");
  CHECK(defaults->nproc_per_node->value == "8");
  CHECK(defaults->problems.empty());
}

TEST_CASE("the step's own node list and count come first", "[unit][launcher][slurm]") {
  auto defaults = slurm_defaults({{"SLURM_JOB_ID", "99"},
                                  {"SLURM_STEP_ID", "3"},
                                  {"SLURM_JOB_NUM_NODES", "8"},
                                  {"SLURM_STEP_NUM_NODES", "2"},
                                  {"SLURM_JOB_NODELIST", "n[1-8]"},
                                  {"SLURM_STEP_NODELIST", "n[5-6]"},
                                  {"CUDA_VISIBLE_DEVICES", "0,1,2"}});
  REQUIRE(defaults);
  CHECK(defaults->nnodes->value == "2");
  CHECK(defaults->rdzv_endpoint->value == "n5:29499");
  CHECK(defaults->nproc_per_node->value == "3");
  CHECK(defaults->nproc_per_node->source == "CUDA_VISIBLE_DEVICES=0,1,2");
}

TEST_CASE("a broken node list is reported", "[unit][launcher][slurm]") {
  auto defaults = slurm_defaults(
      {{"SLURM_JOB_ID", "5"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "n[1-"}});
  REQUIRE(defaults);
  CHECK_FALSE(defaults->rdzv_endpoint);
  REQUIRE(defaults->problems.size() == 1);
  CHECK(defaults->problems[0].find("SLURM_JOB_NODELIST") != std::string::npos);
}
