// `cohort launch -H localhost`: the one host is this machine, so its agent is started by this
// machine's shell, as mpirun starts a local rank, with no ssh at all (an `ssh` in PATH that fails
// and records each call proves it is never run); Ctrl-C and a failing worker behave as over ssh,
// ssh's own flags are refused, and `--launcher ssh` still goes through ssh.

#include <csignal>
#include <filesystem>

#include "tests/integration/integration_support.hpp"

namespace cohort::test {
namespace {

// The launching shell's environment, with a `bin/ssh` first in PATH that writes its words to
// ssh_calls and fails as an unreachable host does.
std::map<std::string, std::string> env_with_failing_ssh(const Scratch& scratch) {
  std::filesystem::create_directories(scratch.file("bin"));
  write_script(scratch.file("bin/ssh"),
               "echo \"$@\" >> " + scratch.file("ssh_calls") +
                   "\necho 'ssh: connect to host: refused' >&2\nexit 255\n");
  const char* path = std::getenv("PATH");
  return {{"PATH", scratch.file("bin") + ":" + (path ? path : "/usr/bin:/bin")}};
}

std::vector<std::string> launch_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kCohortBin, "launch"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

TEST_CASE("launch -H localhost starts its agent without ssh, each worker with its rank",
          "[integration][launch]") {
  Scratch scratch;
  auto env = env_with_failing_ssh(scratch);
  std::string host = GENERATE(as<std::string>{}, "localhost:2", "127.0.0.1:2");
  RunResult result = scratch.run_argv(
      launch_argv({"-H", host, "--no-python", kTestWorkerBin, "--dump-env", "env_{RANK}.json"}),
      scratch.options(env), 60s);
  INFO(result.out << result.err);
  CHECK(result.status == ExitStatus::exited(0));
  CHECK_FALSE(file_exists(scratch.file("ssh_calls")));
  for (int rank = 0; rank < 2; ++rank) {
    EnvDump dumped = load_env(scratch.file("env_" + std::to_string(rank) + ".json"));
    CHECK(env_value(dumped, "RANK") == std::to_string(rank));
    CHECK(env_value(dumped, "LOCAL_RANK") == std::to_string(rank));
    CHECK(env_value(dumped, "WORLD_SIZE") == "2");
    CHECK(env_value(dumped, "MASTER_ADDR") == "127.0.0.1");
  }
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch -H localhost: a failing worker's code is the launch's, with its summary",
          "[integration][launch]") {
  Scratch scratch;
  RunResult result =
      scratch.run_argv(launch_argv({"-H", "localhost:2", "--no-python", kTestWorkerBin,
                                    "--only-rank", "1", "--exit-code", "7"}),
                       scratch.options(env_with_failing_ssh(scratch)), 60s);
  INFO(result.out << result.err);
  CHECK(result.status == ExitStatus::exited(7));
  CHECK(contains(result.err, "[localhost]:   exitcode  : 7"));
  CHECK_FALSE(file_exists(scratch.file("ssh_calls")));
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch -H localhost: Ctrl-C stops the workers, nothing is left",
          "[integration][launch]") {
  Scratch scratch;
  ChildProcess launcher(launch_argv({"-H", "localhost:2", "--no-python", kTestWorkerBin,
                                     "--dump-env", "env_{RANK}.json", "--record-signals",
                                     "signals_{RANK}", "--exit-on-signal", "0", "--hang"}),
                        scratch.options(env_with_failing_ssh(scratch)));
  INFO(launcher.output());
  REQUIRE(
      wait_until([&] { return entries_starting_with(scratch.path(), "env_").size() == 2; }, 60s));
  launcher.signal(SIGINT);
  auto status = launcher.wait(30s);
  REQUIRE(status);
  CHECK(*status == ExitStatus::exited(128 + SIGINT));
  for (int rank = 0; rank < 2; ++rank)
    CHECK(read_file(scratch.file("signals_" + std::to_string(rank))) == "15\n");
  CHECK(scratch.nothing_left());
}

TEST_CASE("launch -H localhost refuses ssh's flags, and --launcher ssh goes through ssh",
          "[integration][launch]") {
  Scratch scratch;
  auto env = env_with_failing_ssh(scratch);
  RunResult refused = scratch.run_argv(
      launch_argv({"-H", "localhost", "--ssh-port", "2222", "--no-python", "/bin/true"}),
      scratch.options(env), 30s);
  INFO(refused.out << refused.err);
  CHECK(refused.status == ExitStatus::exited(2));
  CHECK(contains(refused.err,
                 "--ssh-port: this launch starts its hosts, this machine, without ssh "
                 "(--launcher ssh to use ssh)"));
  RunResult over_ssh = scratch.run_argv(
      launch_argv({"--launcher", "ssh", "-H", "localhost", "--no-python", "/bin/true"}),
      scratch.options(env), 30s);
  INFO(over_ssh.out << over_ssh.err);
  CHECK(over_ssh.status == ExitStatus::exited(4));
  CHECK(contains(read_file(scratch.file("ssh_calls")), "localhost"));
  CHECK(contains(over_ssh.err, "localhost: unreachable"));
  CHECK(scratch.nothing_left());
}

}  // namespace cohort::test
