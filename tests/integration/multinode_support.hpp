// A local "cluster" for multi-node tests: a real cohortd on 127.0.0.1 and cohort run agents
// that pretend to be nodes 127.0.0.2, 127.0.0.3, ... (--local-addr), all started from one
// Scratch so that nothing outlives the test. Test thread only.
#pragma once

#include <csignal>
#include <filesystem>

#include "proto/control_messages.hpp"
#include "tests/integration/integration_support.hpp"

namespace cohort::test {

class Cluster {
 public:
  explicit Cluster(Scratch& scratch) : scratch_(scratch) {}

  /// Starts cohortd on `host` (port 0 the first time, the same port after a restart), with
  /// `extra` flags.
  void start_daemon(const std::string& host = "127.0.0.1", std::vector<std::string> extra = {}) {
    std::string port_file = scratch_.file("daemon_port_" + std::to_string(daemons_++));
    std::vector<std::string> argv{kCohortdBin,           "--host",      host,      "--port",
                                  std::to_string(port_), "--port-file", port_file, "-v"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (!token_file_.empty()) argv.insert(argv.end(), {"--token-file", token_file_});
    ChildOptions options = scratch_.options();
    options.name = "cohortd";
    daemon_ = std::make_unique<ChildProcess>(argv, options);
    INFO(daemon_->output());
    REQUIRE(wait_until([&] { return file_exists(port_file); }, 10s));
    port_ = std::atoi(read_file(port_file).c_str());
    REQUIRE(port_ > 0);
  }
  /// From now on the daemon and every node prove a shared token (a fresh owner-only file).
  void use_token() {
    token_file_ = scratch_.file("token");
    std::ofstream(token_file_) << "cluster-token-" << ::getpid() << "-0123456789abcdef\n";
    ::chmod(token_file_.c_str(), 0600);
  }
  const std::string& token_file() const { return token_file_; }
  ChildProcess& daemon() { return *daemon_; }
  /// SIGTERM to cohortd; true when it exited 143.
  bool stop_daemon() {
    daemon_->signal(SIGTERM);
    auto status = daemon_->wait(10s);
    return status && *status == ExitStatus::exited(128 + SIGTERM);
  }
  int port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  /// `cohort run` as node `address` of run `run_id`, with `worker` as every worker's arguments.
  std::unique_ptr<ChildProcess> node(const std::string& address,
                                     const std::vector<std::string>& flags,
                                     const std::vector<std::string>& worker) const {
    std::vector<std::string> command{kTestWorkerBin};
    command.insert(command.end(), worker.begin(), worker.end());
    return node_running(address, flags, command);
  }
  /// A node whose workers run `command` (an executable and its arguments) instead.
  std::unique_ptr<ChildProcess> node_running(const std::string& address,
                                             const std::vector<std::string>& flags,
                                             const std::vector<std::string>& command) const {
    std::vector<std::string> args{"--rdzv-backend", "c10d",  "--rdzv-endpoint", endpoint(),
                                  "--local-addr",   address, "--no-python"};
    args.insert(args.begin(), flags.begin(), flags.end());
    if (!token_file_.empty()) args.insert(args.begin(), {"--token-file", token_file_});
    args.insert(args.end(), command.begin(), command.end());
    ChildOptions options = scratch_.options();
    options.name = "node_" + address;
    return std::make_unique<ChildProcess>(Scratch::cohort_argv(args), options);
  }

  /// Files named like "<prefix>..." in the scratch directory.
  std::vector<std::string> files(const std::string& prefix) const {
    return entries_starting_with(scratch_.path(), prefix);
  }
  /// How many environment dumps named "<prefix>...json" are complete (a dump is written to
  /// "<name>.tmp" first, then renamed).
  size_t complete_dumps(const std::string& prefix) const {
    size_t count = 0;
    for (const auto& name : files(prefix)) count += ends_with(name, ".json");
    return count;
  }
  bool has_files(const std::string& prefix, size_t count) const {
    return files(prefix).size() >= count;
  }

 private:
  Scratch& scratch_;
  std::unique_ptr<ChildProcess> daemon_;
  int port_ = 0;
  int daemons_ = 0;
  std::string token_file_;
};

/// A port on 127.0.0.1 that was free a moment ago: cohortd bound it and let it go.
inline int free_daemon_port(Scratch& scratch) {
  Cluster probe(scratch);
  probe.start_daemon();
  int port = probe.port();
  probe.stop_daemon();
  return port;
}

/// The first run's node at `address` in a status reply; nullptr when there is none.
inline const proto::StatusNode* node_at(const proto::StatusReply& status,
                                        const std::string& address) {
  if (status.runs.empty()) return nullptr;
  for (const auto& node : status.runs[0].nodes) {
    if (node.address == address) return &node;
  }
  return nullptr;
}

/// `cohort status --rdzv-endpoint ... --json` (proving `token_file`'s token, if any), read back.
inline proto::StatusReply daemon_status(const std::string& endpoint,
                                        const std::string& token_file = {}) {
  std::vector<std::string> argv{kCohortBin, "status", "--rdzv-endpoint", endpoint, "--json"};
  if (!token_file.empty()) argv.insert(argv.end(), {"--token-file", token_file});
  RunResult result = run_to_end(
      argv, ChildOptions{{}, {}, "", std::filesystem::temp_directory_path(), "status"}, 10s);
  INFO(result.err);
  REQUIRE(result.status.success());
  std::string error;
  std::optional<proto::StatusReply> status = proto::decode_status_document(result.out, error);
  INFO(result.out << error);
  REQUIRE(status);
  return *status;
}

}  // namespace cohort::test
