// Every command's --help tells the truth and every parse error points at its own --help: the
// usage line shows the script where there is one, defaults are the real ones, internal flags are
// hidden yet accepted. Real cohort and cohortd binaries.
#include <catch2/catch.hpp>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

RunResult run_binary(const Scratch& scratch, std::vector<std::string> argv) {
  return scratch.run_argv(argv, scratch.options(), 30s);
}

}  // namespace

TEST_CASE("cohort run --help: the script, real defaults, no internal flags",
          "[integration][help]") {
  Scratch scratch;
  RunResult result = run_binary(scratch, {kCohortBin, "run", "--help"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "Usage: cohort run [OPTIONS] SCRIPT [ARGS...]"));
  CHECK(contains(result.out, "--master-port,--master_port INT=29500"));
  CHECK(contains(result.out, "--master-addr,--master_addr TEXT=127.0.0.1"));
  CHECK(contains(result.out, "--raw-output,--raw_output"));
  CHECK(contains(result.out, "PET_RAW_OUTPUT"));
  CHECK_FALSE(contains(result.out, "--node-rank-hint"));
  CHECK_FALSE(contains(result.out, "--under-launch"));
}

TEST_CASE("cohort launch --help shows the script and hides cohort run's internal flags",
          "[integration][help]") {
  Scratch scratch;
  RunResult result = run_binary(scratch, {kCohortBin, "launch", "--help"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "Usage: cohort launch [OPTIONS] SCRIPT [ARGS...]"));
  CHECK(contains(result.out, "--hostfile"));
  CHECK_FALSE(contains(result.out, "--under-launch"));
}

TEST_CASE("cohort, status, rendezvous and cohortd --help name themselves", "[integration][help]") {
  Scratch scratch;
  struct Case {
    std::vector<std::string> argv;
    std::string usage;
  };
  const std::vector<Case> cases{
      {{kCohortBin, "--help"}, "Usage: cohort [OPTIONS] SUBCOMMAND"},
      {{kCohortBin, "status", "--help"}, "Usage: cohort status [OPTIONS]"},
      {{kCohortBin, "rendezvous", "--help"}, "Usage: cohort rendezvous [OPTIONS]"},
      {{kCohortdBin, "--help"}, "Usage: cohortd [OPTIONS]"},
  };
  for (const Case& c : cases) {
    RunResult result = run_binary(scratch, c.argv);
    INFO(Catch::Detail::stringify(c.argv) << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 0);
    CHECK(contains(result.out, c.usage));
    CHECK_FALSE(contains(result.out, "SCRIPT"));
  }
}

TEST_CASE("the operator's commands and cohortd say their version", "[integration][help]") {
  // `cohort rendezvous --version` was refused where `cohortd --version` answered.
  Scratch scratch;
  for (const char* command : {"rendezvous", "status", "stop", "doctor"}) {
    RunResult result = run_binary(scratch, {kCohortBin, command, "--version"});
    INFO(command << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 0);
    CHECK(result.out.rfind("cohort ", 0) == 0);
    CHECK(contains(result.out, "(commit "));
  }
  RunResult daemon = run_binary(scratch, {kCohortdBin, "--version"});
  CHECK(daemon.out.rfind("cohortd ", 0) == 0);
}

TEST_CASE("each command's errors point at its own --help", "[integration][help]") {
  Scratch scratch;
  struct Case {
    std::vector<std::string> argv;
    std::string pointer;
  };
  const std::vector<Case> cases{
      {{kCohortBin, "run", "--bogus", "t.py"}, "cohort run --help"},
      {{kCohortBin, "launch", "--bogus", "t.py"}, "cohort launch --help"},
      {{kCohortBin, "launch", "--hostfile"}, "cohort launch --help"},
      {{kCohortBin, "status", "--bogus"}, "cohort status --help"},
      {{kCohortBin, "rendezvous", "--port", "x"}, "cohort rendezvous --help"},
      {{kCohortBin, "run", "--ma", "1", "t.py"}, "cohort run --help"},
      {{kCohortdBin, "--bogus"}, "cohortd --help"},
      {{kCohortdBin, "--port", "70000"}, "cohortd --help"},
  };
  for (const Case& c : cases) {
    RunResult result = run_binary(scratch, c.argv);
    INFO(Catch::Detail::stringify(c.argv) << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, c.pointer));
    if (c.pointer != "cohort run --help") CHECK_FALSE(contains(result.err, "cohort run --help"));
  }
}

// Kubeflow and others set PET_* for torchrun: a bad one is named, though no flag was typed.
TEST_CASE("a bad value from a PET_ variable names the variable, at parse and in validation",
          "[integration][help]") {
  Scratch scratch;
  auto run = [&](const std::string& variable, const std::string& value,
                 std::vector<std::string> flags) {
    ChildOptions options = scratch.options();
    options.env[variable] = value;
    flags.insert(flags.begin(), {kCohortBin, "run"});
    flags.push_back("t.py");
    RunResult result = scratch.run_argv(flags, options, 30s);
    CHECK(result.status.shell_code() == 2);
    return result.err;
  };
  CHECK(contains(run("PET_MAX_RESTARTS", "x", {}),
                 "cohort run: --max-restarts: expected a number, got 'x' (from PET_MAX_RESTARTS "
                 "in the environment) (cohort run --help)"));
  CHECK(contains(run("PET_NNODES", "0", {}),
                 "cohort run: --nnodes: expected N or MIN:MAX with 0 < MIN <= MAX, got '0' "
                 "(from PET_NNODES in the environment)\n"));
  std::string typed = run("PET_NNODES", "0", {"--nnodes", "0"});
  CHECK(contains(typed, "got '0'\n"));  // typed: the user's own value, no variable named
}

TEST_CASE("a bad value taken from Slurm's variables names the variable", "[integration][help]") {
  Scratch scratch;
  auto run = [&](const std::string& variable, const std::string& value,
                 std::vector<std::string> flags) {
    ChildOptions options = scratch.options();
    options.env.insert({{"SLURM_JOB_ID", "77"},
                        {"SLURM_STEP_ID", "0"},
                        {"SLURM_JOB_NUM_NODES", "2"},
                        {"SLURM_NODEID", "0"},
                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                        {"COHORT_TOKEN", "a-token-for-this-test-only"}});
    options.env[variable] = value;
    flags.insert(flags.begin(), {kCohortBin, "run"});
    flags.insert(flags.end(), {"--no-python", "/bin/true"});
    RunResult result = scratch.run_argv(flags, options, 30s);
    CHECK(result.status.shell_code() == 2);
    return result.err;
  };
  CHECK(run("SLURM_JOB_NUM_NODES", "abc", {}) ==
        "cohort run: --nnodes: expected N or MIN:MAX with 0 < MIN <= MAX, got 'abc' (from "
        "SLURM_JOB_NUM_NODES in the environment)\n");
  CHECK(run("SLURM_NODEID", "x", {}) ==
        "cohort run: --node-rank: expected a whole number, got 'x' (from SLURM_NODEID in the "
        "environment)\n");
  std::string typed = run("SLURM_JOB_NUM_NODES", "2", {"--nnodes", "0"});
  CHECK(contains(typed, "got '0'\n"));  // typed over Slurm's: the user's own value
}

TEST_CASE("internal flags are accepted though hidden, --raw_output and PET_RAW_OUTPUT work",
          "[integration][help]") {
  Scratch scratch;
  RunResult hint =
      scratch.run({"--node-rank-hint", "--no-python", kTestWorkerBin, "--print", "hi"});
  INFO(hint.out << hint.err);
  CHECK(hint.status.shell_code() == 0);
  RunResult raw = scratch.run({"--raw_output", "--no-python", kTestWorkerBin, "--print", "hi"});
  CHECK(raw.out == "hi\n");
  RunResult env =
      scratch.run({"--no-python", kTestWorkerBin, "--print", "hi"}, {{"PET_RAW_OUTPUT", "1"}});
  CHECK(env.out == "hi\n");
}

TEST_CASE("help says what a default means, not its sentinel", "[integration][help]") {
  Scratch scratch;
  RunResult run = run_binary(scratch, {kCohortBin, "run", "--help"});
  INFO(run.out << run.err);
  CHECK(contains(run.out, "--rdzv-id,--rdzv_id ID"));
  CHECK_FALSE(contains(run.out, "--rdzv_id TEXT=none"));  // --cpu-bind's none is a mode
  CHECK(contains(run.out, "--http-port,--http_port PORT"));
  CHECK_FALSE(contains(run.out, "--http_port INT=-1"));
  CHECK(contains(run.out, "default: off"));
  RunResult daemon = run_binary(scratch, {kCohortdBin, "--help"});
  INFO(daemon.out << daemon.err);
  CHECK(contains(daemon.out, "--http-port PORT"));
  CHECK(contains(daemon.out, "default: off"));
}
