#include "launcher/launch/srun_command.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("srun argv: one task on the named node, sharing the job, CPUs unbound, then sh -c",
          "[unit][srun_command]") {
  SrunSettings srun;
  CHECK(srun_argv(srun, "gpu-7", "exec cohort --version") ==
        std::vector<std::string>{"srun", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1",
                                 "--nodelist=gpu-7", "--overlap", "--mpi=none", "--cpu-bind=none",
                                 "--quiet", "/bin/sh", "-c", "exec cohort --version"});
  srun.program = "/opt/slurm/bin/srun";
  srun.extra_args = {"--gres=gpu:8", "--mem=0"};
  std::vector<std::string> argv = srun_argv(srun, "gpu-7", "line");
  CHECK(argv.front() == "/opt/slurm/bin/srun");
  REQUIRE(argv.size() == 14);
  CHECK(argv[9] == "--gres=gpu:8");
  CHECK(argv[10] == "--mem=0");
  CHECK(argv[13] == "line");
}
