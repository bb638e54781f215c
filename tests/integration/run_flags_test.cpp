// `cohort run` on one node: bad command lines end before any worker starts, with exit code 2
// (127 for a --no-python binary that does not exist) and a message naming the flag; --help
// works. Real cohort binary.
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

}  // namespace

TEST_CASE("bad flags are usage errors that name the flag", "[integration][run][flags]") {
  struct Case {
    std::vector<std::string> flags;
    std::string named;  ///< what the message must contain
  };
  const std::vector<Case> cases{
      {{"--bogus-flag"}, "--bogus-flag"},
      {{"--nproc-per-node", "abc"}, "--nproc-per-node"},
      {{"--nnodes", "0"}, "--nnodes"},
      {{"--nnodes", "3:2"}, "--nnodes"},
      {{"--redirects", "9"}, "--redirects"},
      {{"--tee", "4"}, "--tee"},
      {{"--rdzv-backend", "etcd"}, "--rdzv-backend"},
      {{"--signals-to-handle", "SIGFOO"}, "--signals-to-handle"},
      {{"--max-restarts", "-1"}, "--max-restarts"},
      {{"-m"}, "--module"},  // together with the --no-python below
      {{"--verbose=99999999999999999999"}, "--verbose=99999999999999999999: out of range"},
      {{"--master-addr", "-5"}, "--master-addr"},
      {{"--local-addr", "a,b"}, "--local-addr"},
  };
  for (const Case& c : cases) {
    Scratch scratch;
    std::vector<std::string> args = c.flags;
    // A valid command after the bad flag: it must not start.
    for (const std::string& arg : {std::string("--no-python"), kWorker, std::string("--dump-env"),
                                   std::string("started.json")}) {
      args.push_back(arg);
    }
    RunResult result = scratch.run(args);
    INFO(Catch::Detail::stringify(args) << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, c.named));
    CHECK_FALSE(file_exists(scratch.file("started.json")));
  }
}

TEST_CASE("a flag's count past 64 bits is a usage error that names it in a variable too",
          "[integration][run][flags]") {
  Scratch scratch;
  RunResult run = scratch.run({"--no-python", kWorker}, {{"PET_VERBOSE", "99999999999999999999"}});
  INFO(run.out << run.err);
  CHECK(run.status.shell_code() == 2);
  CHECK(contains(run.err, "PET_VERBOSE=99999999999999999999: out of range"));
  RunResult daemon =
      scratch.run_argv({kCohortdBin, "--verbose=-99999999999999999999"}, scratch.options());
  INFO(daemon.out << daemon.err);
  CHECK(daemon.status.shell_code() == 2);
  CHECK(contains(daemon.err, "cohortd: --verbose=-99999999999999999999: out of range"));
}

TEST_CASE("a missing training script is a usage error", "[integration][run][flags]") {
  Scratch scratch;
  SECTION("no script at all") {
    RunResult result = scratch.run({"--nproc-per-node", "2"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, "training script"));
  }
  SECTION("a python script that does not exist: said before any worker starts, status 2") {
    RunResult result = scratch.run({"--nproc-per-node", "2", "no_such_script.py"},
                                   {{"PYTHON_EXEC", "/usr/bin/python3"}});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(result.err ==
          "cohort run: the training script 'no_such_script.py' does not exist here (give -m for a "
          "module, --no-python for a program)\n");  // no worker's output, no failure summary
  }
  SECTION("one that is there but fails as python reads it: python's status, in the summary") {
    std::ofstream(scratch.file("broken.py")) << "this is not python\n";
    RunResult result =
        scratch.run({scratch.file("broken.py")}, {{"PYTHON_EXEC", "/usr/bin/python3"}});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 1);
    CHECK(contains(failure_summary(result.err), "broken.py"));
  }
}

TEST_CASE("a --no-python binary that does not exist exits 127", "[integration][run][flags]") {
  Scratch scratch;
  for (const std::string& binary :
       {std::string("no_such_binary_for_cohort"), scratch.file("no_such_binary")}) {
    RunResult result = scratch.run({"--nproc-per-node", "2", "--no-python", binary});
    INFO(binary << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 127);
    CHECK(contains(result.err, "--no-python"));
    CHECK(contains(result.err, binary));
  }
  // Beside a usage error it is a usage error (2).
  RunResult both = scratch.run({"-m", "--no-python", "no_such_binary_for_cohort"});
  INFO(both.err);
  CHECK(both.status.shell_code() == 2);
  CHECK(contains(both.err, "--module: cannot be combined with --no-python"));
  CHECK_FALSE(contains(both.err, "is not an executable file"));  // -m's word, not a program
}

TEST_CASE("cohort run --help lists the flags", "[integration][run][flags]") {
  Scratch scratch;
  RunResult result = scratch.run({"--help"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "--nproc-per-node"));
  CHECK(contains(result.out, "--max-restarts"));
}

TEST_CASE("a '--' ends cohort's flags, as with torchrun, a later '--' belongs to the script",
          "[integration][run][flags]") {
  Scratch scratch;
  RunResult result = scratch.run({"--no-python", "--", "/bin/echo", "hi", "--", "--nnodes"});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(result.out == "[default0]:hi -- --nnodes\n");
  RunResult status = scratch.run_argv({kCohortBin, "status", "--", "junk"}, scratch.options());
  CHECK(status.status.shell_code() == 2);
  CHECK(contains(status.err, "unexpected arguments: junk"));
}
