#include "launcher/launch/srun_command.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("srun argv: one task on the named node, sharing the job, CPUs unbound, then sh -c",
          "[unit][srun_command]") {
  SrunSettings srun;
  CHECK(srun_argv(srun, "gpu-7", 8, "exec cohort --version") ==
        std::vector<std::string>{"srun", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1",
                                 "--nodelist=gpu-7", "--overlap", "--mpi=none", "--cpu-bind=none",
                                 "--quiet", "/bin/sh", "-c", "exec cohort --version"});
  srun.program = "/opt/slurm/bin/srun";
  srun.extra_args = {"--gres=gpu:8", "--mem=0"};
  std::vector<std::string> argv = srun_argv(srun, "gpu-7", 8, "line");
  CHECK(argv.front() == "/opt/slurm/bin/srun");
  REQUIRE(argv.size() == 14);
  CHECK(argv[9] == "--gres=gpu:8");
  CHECK(argv[10] == "--mem=0");
  CHECK(argv[13] == "line");
}

// sbatch --gpus-per-task=1 --ntasks-per-node=2: a step of one task would inherit one task's GPUs
// (SLURM_GPUS_PER_TASK) and show its two workers a single GPU.
TEST_CASE("srun argv: in a job with GPUs per task each step asks for those of all its slots",
          "[unit][srun_command]") {
  SrunSettings srun;
  srun.gpus_per_task = job_gpus_per_task({{"SLURM_GPUS_PER_TASK", "1"}});
  REQUIRE(srun.gpus_per_task);
  std::vector<std::string> argv = srun_argv(srun, "gpu-7", 2, "line");
  REQUIRE(argv.size() == 13);
  CHECK(argv[9] == "--gres=gpu:2");
  srun.gpus_per_task = job_gpus_per_task({{"SLURM_GPUS_PER_TASK", "a100:2"}});
  srun.extra_args = {"--gres=gpu:1"};  // the user's --launcher-args come later, and win
  argv = srun_argv(srun, "gpu-7", 4, "line");
  CHECK(argv[9] == "--gres=gpu:a100:8");
  CHECK(argv[10] == "--gres=gpu:1");
}

TEST_CASE("srun argv: the job's GPUs per task from SLURM_GPUS_PER_TASK or SLURM_TRES_PER_TASK",
          "[unit][srun_command]") {
  auto gpus = [](std::map<std::string, std::string> env) {
    auto found = job_gpus_per_task(env);
    return found ? found->type + "/" + std::to_string(found->count) + " " + found->variable
                 : std::string("none");
  };
  CHECK(gpus({}) == "none");
  CHECK(gpus({{"SLURM_GPUS_PER_TASK", "2"}}) == "/2 SLURM_GPUS_PER_TASK");
  CHECK(gpus({{"SLURM_GPUS_PER_TASK", "volta:3"}}) == "volta/3 SLURM_GPUS_PER_TASK");
  CHECK(gpus({{"SLURM_TRES_PER_TASK", "cpu:4,gres/gpu:2"}}) == "/2 SLURM_TRES_PER_TASK");
  CHECK(gpus({{"SLURM_TRES_PER_TASK", "cpu=4,gres/gpu=a100:1"}}) == "a100/1 SLURM_TRES_PER_TASK");
  CHECK(gpus({{"SLURM_TRES_PER_TASK", "gpu:3"}}) == "/3 SLURM_TRES_PER_TASK");
  CHECK(gpus({{"SLURM_TRES_PER_TASK", "cpu:4"}}) == "none");
  CHECK(gpus({{"SLURM_GPUS_PER_TASK", "2"}, {"SLURM_TRES_PER_TASK", "gres/gpu:1"}}) ==
        "/2 SLURM_GPUS_PER_TASK");
  // What cannot be read, or several kinds at once, is left alone (--launcher-args can say it).
  for (const char* text : {"x", "0", "-1", "volta:3,kepler:1", "a:b:1", ""}) {
    INFO(text);
    CHECK(gpus({{"SLURM_GPUS_PER_TASK", text}}) == "none");
  }
  CHECK(gpus({{"SLURM_TRES_PER_TASK", "gres/gpu:volta:1,gres/gpu:kepler:1"}}) == "none");
}
