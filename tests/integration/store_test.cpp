// The worker store with real PyTorch peers: Gloo jobs of 2 and 4 ranks under `cohort run` using
// the store its rendezvous hosts (fresh for every round), and the real torchrun's own c10d
// rendezvous running through `cohortd --tcpstore-port` as its external store.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <csignal>
#include <optional>

#include "common/uring_loop.hpp"
#include "store/tcpstore_codec.hpp"
#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

TEST_CASE("Gloo through the hosted store, a restart gets a fresh store",
          "[integration][store][pytorch]") {
  require_torch();
  for (int workers : {2, 4}) {
    Scratch scratch;
    RunResult result = scratch.run_argv(
        Scratch::cohort_argv({"--standalone", "--nproc-per-node", std::to_string(workers),
                              "--max-restarts", "1",
                              std::string(kSourceDir) + "/tests/integration/store_rounds.py"}),
        scratch.options({{"PYTHON_EXEC", kPython}, {"GLOO_SOCKET_IFNAME", "lo"}}), 180s);
    INFO(workers << " workers\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 0);
    CHECK(contains(result.out, "ok round=1 world=" + std::to_string(workers)));
    CHECK_FALSE(contains(result.err, "sees a key of round 0"));
  }
}

TEST_CASE("the real torchrun rendezvous runs through cohortd's TCPStore",
          "[integration][store][pytorch][torchrun]") {
  const std::string torchrun = std::string(kSourceDir) + "/tests/integration/torchrun_debian12.py";
  require_torch();
  require_prerequisite(file_exists(torchrun), torchrun + " (in the repository)");
  Scratch scratch;
  std::string endpoint;
  auto daemon = scratch.start_tcpstore_daemon(endpoint);
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 0; node < 3; ++node) {
    std::vector<std::string> argv =
        torchrun_c10d_argv({kPython, torchrun}, 3, endpoint, scratch.file("torchrun_{RANK}.json"));
    ChildOptions options = scratch.options();
    options.name = "torchrun_" + std::to_string(node);
    agents.push_back(std::make_unique<ChildProcess>(argv, options));
  }
  for (auto& agent : agents) {
    auto status = agent->wait(120s);
    INFO(agent->output() << daemon->output());
    REQUIRE(status);
    CHECK(status->success());
  }
  for (int rank = 0; rank < 3; ++rank) {
    EnvDump env = load_env(scratch.file("torchrun_" + std::to_string(rank) + ".json"));
    CHECK(env_value(env, "WORLD_SIZE") == "3");
    CHECK(env_value(env, "TORCHELASTIC_RUN_ID") == "external");
  }
  daemon->signal(SIGTERM);
  CHECK(daemon->wait(10s) == cohort::ExitStatus::exited(143));
}

TEST_CASE("the hosted store holds more connections than the user's open-file limit",
          "[integration][store]") {
  // cohort raises its own soft limit for the store and gives its workers the user's back.
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  std::string needed = "a hard open-file limit (ulimit -Hn) of 1024 or more";
  require_prerequisite(limit.rlim_max >= 1024, needed + ", not " + std::to_string(limit.rlim_max));
  Scratch scratch;
  std::vector<std::string> argv{"/bin/sh", "-c", "ulimit -Sn 128 && exec \"$@\"", "sh"};
  for (const std::string& arg : Scratch::cohort_argv(
           {"--standalone", "--nproc-per-node", "4", "--no-python", kPython,
            std::string(kSourceDir) + "/tests/integration/store_many_connections.py", "128",
            "100"})) {
    argv.push_back(arg);
  }
  RunResult result = scratch.run_argv(argv, scratch.options(), 90s);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(result.out, "100 connections of 400 answered"));
  CHECK(scratch.nothing_left());
}

TEST_CASE(
    "cohortd refuses a bad --store-quota or --store-budget or --threads or --store-io or an "
    "unwritable --port-file before listening",
    "[integration][store]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd";
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"--port-file", "/nonexistent/dir/port"},
       "--port-file: cannot write '/nonexistent/dir/port'"},
      {{"--port-file", "/proc/port"}, "--port-file: cannot write"},
      {{"--tcpstore-port", "0", "--tcpstore-port-file", "/nonexistent/p"},
       "--tcpstore-port-file: cannot write"},
      {{"--store-quota", "12X"}, "--store-quota: expected a positive number of bytes"},
      {{"--store-quota", "0"}, "--store-quota: expected a positive number of bytes"},
      {{"--store-quota", "99999999999G"}, "--store-quota: expected a positive number of bytes"},
      {{"--store-budget", "0"}, "--store-budget: expected a positive number of bytes"},
      {{"--store-budget", "4T"}, "--store-budget: expected a positive number of bytes"},
      {{"--threads", "65"}, "--threads: expected 1..64 (0: one per core), got 65"},
      {{"--threads", "-1"}, "--threads: expected 1..64 (0: one per core), got -1"},
      {{"--store-io", "uring"}, "--store-io: expected auto, io_uring or epoll, got 'uring'"},
  };
  for (const auto& each : cases) {
    std::vector<std::string> argv{kCohortdBin, "--host", "127.0.0.1", "--port", "0"};
    argv.insert(argv.end(), each.flags.begin(), each.flags.end());
    RunResult result = scratch.run_argv(argv, options, 20s);
    INFO(each.flags.back() << "\n" << result.out << result.err);
    CHECK(result.status.shell_code() == 2);
    CHECK(contains(result.err, each.message));
    CHECK_FALSE(contains(result.out, "listening"));
  }
  // A good quota with suffix and a writable port file: the daemon starts and says where.
  std::string port_file = scratch.file("port");
  ChildProcess daemon({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--store-quota", "64M",
                       "--store-budget", "1g", "--port-file", port_file},
                      options);
  CHECK(wait_until([&] { return file_exists(port_file); }, 10s));
  CHECK_FALSE(contains(daemon.output(), "warning"));
  // A budget below the quota is allowed (the budget wins) but said.
  std::string second_port = scratch.file("port2");
  ChildProcess under({kCohortdBin, "--host", "127.0.0.1", "--port", "0", "--store-quota", "2G",
                      "--store-budget", "1G", "--port-file", second_port},
                     options);
  CHECK(wait_until([&] { return file_exists(second_port); }, 10s));
  CHECK(contains(under.output(),
                 "cohortd: warning: --store-budget 1G is below --store-quota 2G: "
                 "a round's worker store holds at most the budget"));
}

namespace {

// One legacy (1.13) ADD on a fresh connection to a plain store; its reply, or nullopt.
std::optional<int64_t> add_once(const std::string& endpoint, const std::string& key) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.find(':') + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::string request;
  cohort::append_request(request, cohort::StoreRequest{cohort::StoreOp::Add, {key}, {}, 1},
                         cohort::StoreNumbering::Legacy113);
  std::optional<int64_t> value;
  int64_t reply = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()) &&
      ::recv(fd, &reply, sizeof reply, MSG_WAITALL) == sizeof reply) {
    value = reply;
  }
  ::close(fd);
  return value;
}

}  // namespace

TEST_CASE(
    "cohortd where io_uring is refused serves its stores through epoll and --store-io io_uring "
    "exits 1 saying why",
    "[integration][store]") {
  Scratch scratch;
  ChildOptions options = scratch.options();
  options.name = "cohortd";
  // Refused as a container's seccomp profile refuses it.
  RunResult forced = scratch.run_argv({kWithoutIoUringBin, kCohortdBin, "--host", "127.0.0.1",
                                       "--port", "0", "--store-io", "io_uring"},
                                      options, 20s);
  INFO(forced.out << forced.err);
  CHECK(forced.status.shell_code() == 1);
  CHECK(contains(forced.err, "--store-io io_uring: io_uring_setup: Operation not permitted"));
  CHECK_FALSE(contains(forced.out, "listening"));

  std::string endpoint;
  auto daemon = scratch.start_tcpstore_daemon(endpoint, {kWithoutIoUringBin}, {"-v"});
  CHECK(add_once(endpoint, "/n") == 1);
  CHECK(add_once(endpoint, "/n") == 2);
  CHECK(wait_until(
      [&] {
        return contains(daemon->output(), "through epoll: io_uring_setup: Operation not permitted");
      },
      10s));
  daemon->signal(SIGTERM);
  CHECK(daemon->wait(10s) == cohort::ExitStatus::exited(143));
}

TEST_CASE("cohortd serves its stores through io_uring where the kernel allows it",
          "[integration][store]") {
  {
    // A kernel feature, not something scripts/setup can install: where it is refused the case
    // above covers cohortd, and this one says so.
    boost::asio::io_context probe;
    std::string why;
    if (cohort::UringLoop::open(probe, &why) == nullptr) {
      WARN("io_uring is not usable here (" << why << "): nothing to check");
      return;
    }
  }
  Scratch scratch;
  std::string endpoint;
  auto daemon = scratch.start_tcpstore_daemon(endpoint, {}, {"-v", "--threads", "2"});
  CHECK(add_once(endpoint, "/n") == 1);
  CHECK(add_once(endpoint, "/n") == 2);
  CHECK(wait_until([&] { return contains(daemon->output(), "2 io threads, through io_uring"); },
                   10s));
  daemon->signal(SIGTERM);
  CHECK(daemon->wait(10s) == cohort::ExitStatus::exited(143));
}
