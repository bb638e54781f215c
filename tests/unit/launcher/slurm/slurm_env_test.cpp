#include <catch2/catch.hpp>
#include <set>

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
  CHECK(defaults->rdzv_endpoint->value == "gpu-01:31239");
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
  CHECK(defaults->rdzv_endpoint->value == "n5:31844");
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

// Two steps of one job on the same first node, or two jobs 1000 ids apart sharing it, got the
// same port (29400 + job id mod 1000): the second joined or was refused by the first's rendezvous.
TEST_CASE("the rendezvous port differs for the steps of a job and for jobs sharing a node",
          "[unit][launcher][slurm]") {
  auto port = [](const char* job, const char* step) {
    auto defaults = slurm_defaults(
        {{"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", step}, {"SLURM_STEP_NODELIST", "n1"}});
    REQUIRE(defaults);
    REQUIRE(defaults->rdzv_endpoint);
    return std::stoi(defaults->rdzv_endpoint->value.substr(3));
  };
  CHECK(port("777", "0") != port("777", "1"));
  CHECK(port("1042", "0") != port("2042", "0"));
  CHECK(port("1042", "0") != port("1043", "0"));
  CHECK(port("777", "0") == port("777", "0"));  // every node of the step computes the same
  // The steps of one job never share a port, up to 3000 of them.
  for (uint64_t job : {0ULL, 777ULL, 1042ULL, 4294967295ULL}) {
    std::set<int> ports;
    for (uint64_t step = 0; step < 3000; ++step) {
      int p = slurm_rendezvous_port(job, step);
      CHECK(p >= kSlurmFirstPort);
      CHECK(p <= kSlurmLastPort);
      ports.insert(p);
    }
    CHECK(ports.size() == 3000);
  }
  CHECK(kSlurmLastPort < 32768);  // below Linux's ephemeral ports
  // Jobs sharing a node: ids in a row and ids 1000 apart land on different ports.
  std::set<int> jobs;
  for (uint64_t job = 1000; job < 1010; ++job) {
    jobs.insert(slurm_rendezvous_port(job, 0));
    jobs.insert(slurm_rendezvous_port(job + 1000, 0));
  }
  CHECK(jobs.size() == 20);
  CHECK(port("5", "batch") >= kSlurmFirstPort);  // a step id that is not a number is hashed
}
