#include "launcher/slurm/slurm_defaults.hpp"

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

using namespace cohort;

namespace {

const EnvMap kStep = {{"SLURM_JOB_ID", "77"},       {"SLURM_STEP_ID", "0"},
                      {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_JOB_NODELIST", "node[1-2]"},
                      {"SLURM_NODEID", "1"},        {"SLURM_GPUS_ON_NODE", "4"}};

struct Applied {
  RunOptions options;
  std::vector<std::string> taken;
  std::vector<std::string> problems;
};

Applied apply(std::vector<std::string> args, const EnvMap& env) {
  Applied applied;
  CLI::App app;
  add_run_flags(app, applied.options);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  applied.taken = apply_slurm_defaults(app, applied.options, env, applied.problems);
  return applied;
}

}  // namespace

TEST_CASE("inside a Slurm step, SLURM_* fills what the flags left unset",
          "[unit][launcher][slurm]") {
  Applied applied = apply({"--nnodes", "1:2", "t.py"}, kStep);
  const RunOptions& options = applied.options;
  CHECK(applied.problems.empty());
  CHECK(options.nnodes == "1:2");  // the command line wins
  CHECK(options.nproc_per_node == "4");
  CHECK(options.rdzv_id == "slurm-77.0");
  CHECK(options.rdzv_endpoint == "node1:29477");
  CHECK(options.rdzv_backend == "c10d");
  CHECK(options.node_rank == 1);
  CHECK(options.node_rank_hint);
  CHECK(options.in_slurm_step);
  REQUIRE_FALSE(applied.taken.empty());
  CHECK(applied.taken[0] == "--nproc-per-node 4 from SLURM_GPUS_ON_NODE=4");
}

TEST_CASE("outside a Slurm step the flags stay as they are", "[unit][launcher][slurm]") {
  Applied applied = apply({"t.py"}, {{"SLURM_JOB_ID", "77"}});
  CHECK(applied.taken.empty());
  CHECK(applied.options.rdzv_endpoint.empty());
  CHECK(applied.options.rdzv_backend == "static");
  CHECK_FALSE(applied.options.in_slurm_step);
}

TEST_CASE("flag --standalone and --master-addr keep Slurm's endpoint and run id out",
          "[unit][launcher][slurm]") {
  Applied standalone = apply({"--standalone", "t.py"}, kStep);
  CHECK(standalone.options.rdzv_endpoint.empty());
  CHECK(standalone.options.rdzv_id == "none");
  Applied with_master = apply({"--master-addr", "m1", "t.py"}, kStep);
  CHECK(with_master.options.rdzv_endpoint.empty());
  CHECK(with_master.options.rdzv_backend == "static");
  CHECK(with_master.options.rdzv_id == "slurm-77.0");
}

TEST_CASE("a Slurm node list that does not parse is a problem", "[unit][launcher][slurm]") {
  EnvMap env = kStep;
  env["SLURM_JOB_NODELIST"] = "node[1-";
  Applied applied = apply({"t.py"}, env);
  REQUIRE(applied.problems.size() == 1);
  CHECK(applied.problems[0].find("SLURM_JOB_NODELIST") != std::string::npos);
  CHECK(applied.options.rdzv_endpoint.empty());
}
