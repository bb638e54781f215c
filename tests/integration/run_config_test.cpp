// `cohort run` and `cohortd` find local configuration problems before anything starts: bad run ids,
// an unwritable --log-dir, heartbeat settings below their floors, negative or non-finite seconds, a
// --port-file cohortd could not write, a bad --store-quota or --store-budget. Each exits 2 with a
// message naming the flag, at once (a multi-node node does not first wait out the rendezvous), and
// writes nothing outside --log-dir. Real cohort and cohortd binaries.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>
#include <tuple>

#include "common/free_port.hpp"
#include "common/text.hpp"
#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

const std::string kWorker = kTestWorkerBin;

struct Case {
  std::vector<std::string> flags;
  std::string named;  ///< what the message must contain
  std::map<std::string, std::string> env = {};
};

// Runs `cohort run FLAGS --no-python test_worker --dump-env started.json` and checks that it
// exits 2 within 10 s naming `named`, and that no worker started.
void check_refused(const Scratch& scratch, const Case& c) {
  std::vector<std::string> args = c.flags;
  for (const std::string& arg : {std::string("--no-python"), kWorker, std::string("--dump-env"),
                                 scratch.file("started.json")}) {
    args.push_back(arg);
  }
  auto start = std::chrono::steady_clock::now();
  RunResult result = scratch.run(args, c.env, 30s);
  auto took = std::chrono::steady_clock::now() - start;
  INFO(Catch::Detail::stringify(args) << "\n" << result.out << result.err);
  CHECK(result.status.shell_code() == 2);
  CHECK(contains(result.err, c.named));
  CHECK(took < 10s);
  CHECK_FALSE(file_exists(scratch.file("started.json")));
}

// A multi-node c10d run whose agent would host the rendezvous on a free loopback port: before
// this change a local problem surfaced only after the join timeout (600 s; check_refused's 30 s
// bound ends the test first).
std::vector<std::string> two_nodes(std::vector<std::string> flags) {
  int port = cohort::pick_free_port("127.0.0.1");
  REQUIRE(port > 0);
  for (const std::string& flag :
       {std::string("--nnodes"), std::string("2"), std::string("--rdzv-backend"),
        std::string("c10d"), std::string("--rdzv-endpoint"), "127.0.0.1:" + std::to_string(port)}) {
    flags.push_back(flag);
  }
  return flags;
}

}  // namespace

TEST_CASE("bad run ids are usage errors, and no log leaves --log-dir",
          "[integration][run][config]") {
  Scratch scratch;
  std::string logs = scratch.file("a/b/logs");
  const std::vector<Case> cases{
      {{"--rdzv-id", "../../escape", "--log-dir", logs}, "--rdzv-id"},
      {{"--rdzv-id", "", "--log-dir", logs}, "--rdzv-id '': the run id is empty"},
      {{"--rdzv-id", ".hidden", "--log-dir", logs}, "--rdzv-id"},
      {{"--rdzv-id", "a b", "--log-dir", logs}, "--rdzv-id"},
      {{"--log-dir", logs}, "--rdzv-id", {{"PET_RDZV_ID", "../escape"}}},
      {{"--log-dir", logs}, "at most 128", {{"PET_RDZV_ID", std::string(10240, 'x')}}},
      {two_nodes({"--rdzv-id", std::string(10240, 'x'), "--log-dir", logs}), "--rdzv-id"},
      // Slurm's slurm-<job>.<step>, from a job id that is not one.
      {{"--log-dir", logs},
       "--rdzv-id",
       {{"SLURM_JOB_ID", "../../escape"}, {"SLURM_STEP_ID", "0"}}},
  };
  for (const Case& c : cases) check_refused(scratch, c);
  CHECK_FALSE(file_exists(scratch.file("a/escape")));
  CHECK_FALSE(file_exists(scratch.file("a/b/escape")));
  CHECK_FALSE(file_exists(logs));  // a refused command line creates nothing
}

TEST_CASE("a good run id names the run's log directory", "[integration][run][config]") {
  Scratch scratch;
  for (const std::string& id : {std::string("exp_4.1"), std::string("user@host:job-7")}) {
    RunResult result = scratch.run({"--rdzv-id", id, "--log-dir", scratch.file("logs"),
                                    "--no-python", kWorker, "--print", "hi"});
    INFO(result.out << result.err);
    CHECK(result.status.shell_code() == 0);
    CHECK(std::filesystem::is_directory(run_log_dir(scratch.file("logs"), id) + "/attempt_0/0"));
  }
}

TEST_CASE("an unwritable --log-dir is found before the rendezvous", "[integration][run][config]") {
  Scratch scratch;
  std::ofstream(scratch.file("plain")) << "a file, not a directory\n";
  const std::vector<Case> cases{
      {{"--log-dir", scratch.file("plain/logs")}, "--log-dir " + scratch.file("plain/logs")},
      {two_nodes({"--log-dir", scratch.file("plain/logs")}), "--log-dir"},
      {two_nodes({"--log-dir", "/proc/self/logs"}), "--log-dir /proc/self/logs"},
  };
  for (const Case& c : cases) check_refused(scratch, c);
  CHECK(scratch.nothing_left());
}

TEST_CASE("heartbeat settings below their floors are refused", "[integration][run][config]") {
  Scratch scratch;
  const std::vector<Case> cases{
      {{"--rdzv-conf", "keep_alive_interval=0.001,heartbeat_timeout=0.002"},
       "--rdzv-conf: keep_alive_interval=0.001: at least 0.05"},
      {{"--rdzv-conf", "heartbeat_timeout=0.1,keep_alive_interval=0.05"},
       "--rdzv-conf: heartbeat_timeout"},
      {{"--rdzv-conf", "keep_alive_interval=1,heartbeat_timeout=1.5"},
       "heartbeat_timeout (1.5 s) must be at least twice keep_alive_interval (1 s)"},
      {two_nodes({"--rdzv-conf", "keep_alive_interval=1,keep_alive_max_attempt=1"}),
       "keep_alive_max_attempt"},
  };
  for (const Case& c : cases) check_refused(scratch, c);
}

TEST_CASE("negative, NaN and infinite seconds are refused for every float flag",
          "[integration][run][config]") {
  Scratch scratch;
  const std::vector<Case> cases{
      {{"--shutdown-timeout", "-5"}, "--shutdown-timeout"},
      {{"--shutdown-timeout", "nan"}, "--shutdown-timeout"},
      {{"--shutdown-timeout", "inf"}, "--shutdown-timeout"},
      {{}, "--shutdown-timeout", {{"PET_SHUTDOWN_TIMEOUT", "-1"}}},
      {{"--monitor-interval", "nan"}, "--monitor-interval"},
      {{"--monitor-interval", "-0.5"}, "--monitor-interval"},
      {{"--monitor-interval", "inf"}, "--monitor-interval"},
      {{}, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "nan"}}},
  };
  for (const Case& c : cases) check_refused(scratch, c);
}

TEST_CASE("flag --help shows the shutdown timeout's default as 30", "[integration][run][config]") {
  Scratch scratch;
  RunResult result = scratch.run({"--help"});
  INFO(result.out);
  CHECK(result.status.shell_code() == 0);
  size_t flag = result.out.find("--shutdown-timeout");
  REQUIRE(flag != std::string::npos);
  std::string line = result.out.substr(flag, result.out.find('\n', flag) - flag);
  CHECK(contains(line, "30"));
  CHECK_FALSE(contains(line, "-1"));
}

TEST_CASE("cohort run --store-quota and --store-budget are checked and reach the store it hosts",
          "[integration][run][config]") {
  Scratch scratch;
  for (const Case& c : std::vector<Case>{{{"--store-quota", "0"}, "--store-quota"},
                                         {{"--store-quota", "1T"}, "--store-quota"},
                                         {{}, "--store-quota", {{"PET_STORE_QUOTA", "lots"}}},
                                         {{"--store-budget", "0"}, "--store-budget"},
                                         {{}, "--store-budget", {{"PET_STORE_BUDGET", "9X"}}}}) {
    check_refused(scratch, c);
  }
  require_torch();
  // A worker sets a 64 KiB value and reads it back: past a 16 KiB quota (or budget) the store
  // closes the connection, under 1M it fits.
  const std::string script =
      "import datetime, os, torch.distributed as d\n"
      "s = d.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), 1, False,\n"
      "               datetime.timedelta(seconds=20))\n"
      "try:\n"
      "    s.set('big', b'x' * 65536)\n"
      "    s.get('big')\n"  // SET has no reply: the GET sees the closed connection
      "    print('stored')\n"
      "except Exception as e:\n"
      "    print('refused:', e)\n";
  for (const auto& [flag, size, expected] :
       {std::tuple{"--store-quota", "16K", "refused"}, std::tuple{"--store-quota", "1M", "stored"},
        std::tuple{"--store-budget", "16K", "refused"}}) {
    RunResult result = scratch.run({flag, size, "--no-python", kPython, "-c", script}, {}, 60s);
    INFO(flag << " " << size << "\n" << result.out << result.err);
    CHECK(contains(result.out, expected));
  }
}

TEST_CASE("cohortd refuses a --port-file it could not write, before listening",
          "[integration][store][config]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd";
  std::filesystem::create_directories(scratch.file("a_directory"));
  std::ofstream(scratch.file("plain")) << "x";
  for (const std::string& path :
       {scratch.file("a_directory"), scratch.file("plain/port"), std::string("/proc/port")}) {
    RunResult result = scratch.run_argv(
        {kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--port-file", path}, options, 20s);
    INFO(path << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, "--port-file"));
    CHECK_FALSE(contains(result.out, "listening"));
  }
}

TEST_CASE("the operator's commands refuse an empty value: no daemon without its token",
          "[integration][config]") {
  // "--token-file=$TOKEN_FILE" with the variable unset started a daemon without a token.
  Scratch scratch;
  const std::vector<std::vector<std::string>> cases{
      {kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--token-file="},
      {kCohortBin, "rendezvous", "--port", "0", "--token-file", ""},
      {kCohortdBin, "--port", "0", "--http-port="},
      {kCohortdBin, "--port", "0", "--http-port", "-1"},
      {kCohortBin, "status", "--rdzv-id="},
      {kCohortBin, "status", "--watch="},  // was a watch every 2 s
      {kCohortBin, "stop", "--rdzv-id", "r", "--reason="},
      {kCohortBin, "doctor", "--token-file="}};
  for (const auto& argv : cases) {
    RunResult result = scratch.run_argv(argv, scratch.options(), 20s);
    INFO(cohort::join(argv, " ") << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK((contains(result.err, "got ''") || contains(result.err, "got '-1'")));
    CHECK_FALSE(contains(result.out + result.err, "listening"));
  }
  RunResult bad_port =
      scratch.run_argv({kCohortBin, "stop", "--rdzv-id", "r", "--rdzv-endpoint", "[::1]:99999"},
                       scratch.options(), 20s);
  CHECK(bad_port.status.shell_code() == 2);
  CHECK(bad_port.err ==  // the flag named once, no endpoint in front of it
        "cohort stop: --rdzv-endpoint: expected host[:port] (port 1-65535), got '[::1]:99999'\n");
}

TEST_CASE("a value CLI11 cannot convert is named with what was expected", "[integration][config]") {
  Scratch scratch;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{kCohortdBin, "--threads", "abc"}, "cohortd: --threads: expected a number, got 'abc'"},
      {{kCohortBin, "doctor", "--expect-ranks", "x"},
       "cohort doctor: --expect-ranks: expected a number, got 'x'"},
      {{kCohortBin, "status", "--json=maybe"},
       "cohort status: --json: expected true or false, got 'maybe'"}};
  for (const auto& [argv, expected] : cases) {
    RunResult result = scratch.run_argv(argv, scratch.options(), 20s);
    INFO(result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, expected));
    CHECK_FALSE(contains(result.err, "Could not convert"));
  }
}

TEST_CASE("cohort status and stop give a silent daemon --timeout seconds",
          "[integration][config]") {
  // A listener whose connections the kernel completes and nobody accepts: a daemon held up.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  std::string endpoint = "127.0.0.1:" + std::to_string(silent.local_endpoint().port());
  Scratch scratch;
  for (const char* command : {"status", "stop"}) {
    auto start = std::chrono::steady_clock::now();
    RunResult result = scratch.run_argv(
        {kCohortBin, command, "--rdzv-endpoint", endpoint, "--rdzv-id", "r", "--timeout", "1.5"},
        scratch.options(), 20s);
    auto took = std::chrono::steady_clock::now() - start;
    INFO(command << ": " << result.err);
    CHECK(result.status.shell_code() == 3);
    CHECK(contains(result.err, "it accepted the connection but sent nothing within the timeout"));
    CHECK(took >= 1400ms);
    CHECK(took < 4s);  // 5 s without --timeout
  }
}

TEST_CASE("cohort status refuses --rdzv-id and --events that name two runs",
          "[integration][config]") {
  // It showed the events of --events and ignored --rdzv-id.
  Scratch scratch;
  RunResult result = scratch.run_argv(
      {kCohortBin, "status", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id", "a", "--events", "b"},
      scratch.options(), 20s);
  INFO(result.err);
  CHECK(result.status.shell_code() == 2);
  CHECK(contains(result.err, "cohort status: --events b names another run than --rdzv-id a"));
  RunResult same = scratch.run_argv(
      {kCohortBin, "status", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id", "a", "--events", "a"},
      scratch.options(), 20s);
  CHECK(same.status.shell_code() == 3);  // asked: nothing listens there
}

TEST_CASE("cohort stop refuses a --reason of more than one line", "[integration][config]") {
  // The reason goes into every node's log, the run's events and cohort status, a line each.
  Scratch scratch;
  for (const std::string& reason :
       {std::string("two\nlines"), std::string("a\tb"), std::string("bell\x07")}) {
    RunResult result = scratch.run_argv({kCohortBin, "stop", "--rdzv-id", "r", "--rdzv-endpoint",
                                         "127.0.0.1:1", "--reason", reason},
                                        scratch.options(), 20s);
    INFO(result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, "cohort stop: --reason: one line of text, without line breaks"));
    CHECK_FALSE(contains(result.err, "cannot reach"));  // refused before asking
  }
}

TEST_CASE("an operator's command whose output was lost does not succeed", "[integration][config]") {
  // `cohort doctor --json > report` on a full disk: not exit 0 with half a report.
  Scratch scratch;
  RunResult result = scratch.run_argv(
      {"/bin/sh", "-c", std::string("exec ") + kCohortBin + " doctor --json > /dev/full"},
      scratch.options(), 60s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 1);
  CHECK(contains(result.err, "cohort doctor: cannot write stdout: No space left on device"));
}

TEST_CASE("cohortd writes its port file once every listener is up, and SIGHUP does not end it",
          "[integration][config][signals]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd";
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
  std::string port_file = scratch.file("port");
  RunResult refused =
      scratch.run_argv({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
                        "--tcpstore-port", std::to_string(taken.local_endpoint().port())},
                       options, 20s);
  INFO(refused.out << refused.err);
  CHECK(refused.status.shell_code() == 1);
  CHECK_FALSE(std::filesystem::exists(port_file));  // no port file naming a daemon that is gone
  CHECK_FALSE(contains(refused.out, "listening"));

  ChildProcess daemon({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file},
                      options);
  REQUIRE(wait_until([&] { return std::filesystem::exists(port_file); }, 20s));
  daemon.signal(SIGHUP);  // the terminal it was started from, closed
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(daemon.wait(0ms));
  daemon.signal(SIGTERM);
  auto status = daemon.wait(20s);
  REQUIRE(status);
  CHECK(*status == cohort::ExitStatus::exited(128 + SIGTERM));
}

TEST_CASE("a mistyped command or flag is refused with the closest name, doing nothing",
          "[integration][config]") {
  Scratch scratch;
  struct Case {
    std::vector<std::string> argv;
    std::string said;
  };
  std::vector<Case> cases{
      {{kCohortBin, "status", "--rdzv-endpiont", "127.0.0.1:29460"},
       "cohort status: unknown argument '--rdzv-endpiont' (did you mean --rdzv-endpoint?)"},
      {{kCohortBin, "rendezvous", "--prot", "29461"},
       "cohort rendezvous: unknown argument '--prot' (did you mean --port?)"},
      {{kCohortdBin, "--prot", "29461"},
       "cohortd: unknown argument '--prot' (did you mean --port?) (cohortd --help)"},
      {{kCohortBin, "run", "--nproc-per-ndoe", "2", "train.py"},
       "cohort run: unknown flag '--nproc-per-ndoe' (did you mean --nproc-per-node?)"},
      {{kCohortBin, "launch", "--nproc-per-ndoe", "2", "train.py"},
       "cohort launch: unknown flag '--nproc-per-ndoe' (did you mean --nproc-per-node?)"},
      {{kCohortBin, "runn", "train.py"}, "cohort: unknown command 'runn' (did you mean 'run'?)"}};
  for (const Case& c : cases) {
    RunResult result = scratch.run_argv(c.argv, scratch.options(), 20s);
    INFO(c.argv[1] << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, c.said));
    CHECK_FALSE(contains(result.out + result.err, "listening"));
  }
}
