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
  SlurmApplied slurm;
};

Applied apply(std::vector<std::string> args, const EnvMap& env) {
  Applied applied;
  CLI::App app;
  add_run_flags(app, applied.options);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  applied.slurm = apply_slurm_defaults(app, applied.options, env);
  applied.taken = applied.slurm.taken;
  applied.problems = applied.slurm.problems;
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
  CHECK(options.rdzv_endpoint == "node1:29920");
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

// srun -N2 cohort run --standalone: an independent one-node run on each node, as torchrun's.
TEST_CASE("flag --standalone in a step of several nodes takes neither the node count nor the rank",
          "[unit][launcher][slurm]") {
  Applied standalone = apply({"--standalone", "t.py"}, kStep);
  CHECK(standalone.problems.empty());
  CHECK(standalone.options.nnodes == "1:1");
  CHECK(standalone.options.node_rank == 0);
  CHECK_FALSE(standalone.options.node_rank_hint);
  CHECK(standalone.options.nproc_per_node == "4");  // the node's own GPUs still
  for (const std::string& line : standalone.taken) {
    CHECK(line.rfind("--nnodes", 0) != 0);
    CHECK(line.rfind("--node-rank", 0) != 0);
  }
}

TEST_CASE("a refused token at Slurm's endpoint names another job or step and --rdzv-endpoint",
          "[unit][launcher][slurm]") {
  CHECK(apply({"t.py"}, kStep).slurm.refused_token_hint ==
        " (node1:29920 is the endpoint cohort derived from the Slurm job and step: another job "
        "or step likely holds that port; give this step its own with --rdzv-endpoint HOST:PORT)");
  CHECK(apply({"--rdzv-endpoint", "h:1", "t.py"}, kStep).slurm.refused_token_hint.empty());
  CHECK(apply({"--standalone", "t.py"}, kStep).slurm.refused_token_hint.empty());
}

// --master-port was silently replaced by the derived port inside a step.
TEST_CASE("an explicit --master-port is the rendezvous port on Slurm's first host",
          "[unit][launcher][slurm]") {
  Applied static_run = apply({"--rdzv-backend", "static", "--master-port", "29555", "t.py"}, kStep);
  CHECK(static_run.problems.empty());
  CHECK(static_run.options.rdzv_endpoint == "node1:29555");
  CHECK(static_run.options.rdzv_backend == "static");
  CHECK(std::find(static_run.taken.begin(), static_run.taken.end(),
                  "--rdzv-endpoint node1:29555 from SLURM_JOB_NODELIST=node[1-2] and "
                  "--master-port") != static_run.taken.end());
  CHECK(static_run.slurm.refused_token_hint.empty());  // the port is the user's
  EnvMap env = kStep;
  env["SLURM_JOB_NUM_NODES"] = "3";
  env["SLURM_JOB_NODELIST"] = "n[1-3]";
  Applied elastic = apply({"--nnodes", "2:3", "--master-port", "29555", "t.py"}, env);
  CHECK(elastic.options.rdzv_endpoint == "n1:29555");
  CHECK(elastic.options.rdzv_fallback == "n2:29555,n3:29555");
  CHECK(elastic.options.rdzv_backend == "c10d");
}

TEST_CASE("a Slurm node list that does not parse is a problem", "[unit][launcher][slurm]") {
  EnvMap env = kStep;
  env["SLURM_JOB_NODELIST"] = "node[1-";
  Applied applied = apply({"t.py"}, env);
  REQUIRE(applied.problems.size() == 1);
  CHECK(applied.problems[0].find("SLURM_JOB_NODELIST") != std::string::npos);
  CHECK(applied.options.rdzv_endpoint.empty());
}

TEST_CASE("an elastic run of three nodes or more gets the next two hosts as fallbacks",
          "[unit][launcher][slurm][quorum]") {
  EnvMap env = kStep;
  env["SLURM_JOB_NUM_NODES"] = "4";
  env["SLURM_JOB_NODELIST"] = "gpu-[07-10]";
  Applied elastic = apply({"--nnodes", "2:4", "t.py"}, env);
  CHECK(elastic.problems.empty());
  CHECK(elastic.options.rdzv_endpoint == "gpu-07:29920");
  CHECK(elastic.options.rdzv_fallback == "gpu-08:29920,gpu-09:29920");
  CHECK(
      std::find(elastic.taken.begin(), elastic.taken.end(),
                "--rdzv-fallback gpu-08:29920,gpu-09:29920 from SLURM_JOB_NODELIST=gpu-[07-10]") !=
      elastic.taken.end());
  // A fixed size cannot go on without a node: nothing to move for.
  CHECK(apply({"t.py"}, env).options.rdzv_fallback.empty());
  // Two nodes: one survivor is no majority, so the rendezvous does not move.
  CHECK(apply({"--nnodes", "1:2", "t.py"}, kStep).options.rdzv_fallback.empty());
  // The user's own, or none with an endpoint of the user's.
  CHECK(apply({"--nnodes", "2:4", "--rdzv-fallback", "x", "t.py"}, env).options.rdzv_fallback ==
        "x");
  CHECK(apply({"--nnodes", "2:4", "--rdzv-endpoint", "h:1", "t.py"}, env)
            .options.rdzv_fallback.empty());
}

TEST_CASE("a problem with a value taken from Slurm names the variable it came from",
          "[unit][launcher][slurm]") {
  EnvMap env = kStep;
  env["SLURM_NODEID"] = "x";
  Applied applied = apply({"t.py"}, env);
  REQUIRE(applied.problems.size() == 1);
  CHECK(applied.problems[0] == "--node-rank: expected a whole number, got 'x'");
  CHECK(slurm_origin(applied.slurm, applied.problems[0]) ==
        " (from SLURM_NODEID in the environment)");
  CHECK(slurm_origin(applied.slurm, "--nnodes: expected N or MIN:MAX, got '0'") ==
        " (from SLURM_JOB_NUM_NODES in the environment)");
  CHECK(slurm_origin(applied.slurm, "--rdzv-id: bad") ==
        " (from SLURM_JOB_ID and SLURM_STEP_ID in the environment)");
  CHECK(slurm_origin(applied.slurm, "--max-restarts: bad") == "");  // not Slurm's
  CHECK(slurm_origin(applied.slurm, "no flag named") == "");
  // A flag on the command line is the user's, not Slurm's.
  Applied typed = apply({"--nnodes", "0", "t.py"}, kStep);
  CHECK(slurm_origin(typed.slurm, "--nnodes: expected N or MIN:MAX, got '0'") == "");
  env["SLURM_NODEID"] = "99999999999";
  CHECK(apply({"t.py"}, env).problems.size() == 1);
}
