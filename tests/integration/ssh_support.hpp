// Real OpenSSH servers for the `cohort launch` tests: one sshd per loopback address (127.0.0.2,
// 127.0.0.3, ...; or one in a test's network namespace), each with its own host key, all
// accepting one user key that the test generates, on one free port. They stand in for the hosts of
// a cluster; the test's launches reach them through the system ssh with --ssh-port and
// --ssh-option. Test thread only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>

#include "common/free_port.hpp"
#include "process/process_tree.hpp"
#include "tests/integration/integration_support.hpp"

namespace cohort::test {

inline void require_ssh() {
  require_prerequisite(file_exists("/usr/sbin/sshd") && file_exists("/usr/bin/ssh"),
                       "OpenSSH's /usr/sbin/sshd and /usr/bin/ssh (scripts/setup installs "
                       "openssh-server and openssh-client)");
}

/// True once something accepts TCP connections on address:port.
inline bool accepts_connections(const std::string& address, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &target.sin_addr);
  bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) == 0;
  ::close(fd);
  return connected;
}

class SshHosts {
 public:
  /// Starts sshd on 127.0.0.2 .. 127.0.0.(count+1).
  SshHosts(Scratch& scratch, int count) : scratch_(scratch) {
    dir_ = scratch.file("ssh");
    std::filesystem::create_directories(dir_);
    std::filesystem::create_directories("/run/sshd");  // sshd's privilege-separation directory
    keygen(dir_ + "/user_key");
    std::filesystem::copy_file(dir_ + "/user_key.pub", dir_ + "/authorized_keys");
    port_ = pick_free_port("127.0.0.2");
    REQUIRE(port_ > 0);
    for (int i = 0; i < count; ++i) start("127.0.0." + std::to_string(i + 2));
  }

  int port() const { return port_; }
  const std::vector<std::string>& addresses() const { return addresses_; }
  std::string address(size_t i) const { return addresses_.at(i); }

  /// The cohort launch flags that reach these servers: port, key, no host-key prompts.
  std::vector<std::string> flags() const {
    return {"--ssh-port",        std::to_string(port_),
            "--ssh-option",      "IdentityFile=" + dir_ + "/user_key",
            "--ssh-option",      "IdentitiesOnly=yes",
            "--ssh-option",      "UserKnownHostsFile=/dev/null",
            "--ssh-option",      "StrictHostKeyChecking=no",
            "--ssh-option",      "LogLevel=ERROR",
            "--connect-timeout", "5"};
  }

  /// The session processes of every host's sshd (its children: one per open connection).
  std::vector<pid_t> sessions() const {
    std::vector<pid_t> found;
    for (const ProcStat& process : scan_processes()) {
      for (const auto& server : servers_) {
        if (process.ppid == server->pid()) found.push_back(process.pid);
      }
    }
    return found;
  }

  /// Kills the sshd of one host (the listener; sessions already open stay).
  void stop(size_t i) {
    servers_.at(i)->signal(SIGKILL);
    servers_.at(i)->wait(5s);
  }

  /// The host goes down: its sshd and every session it serves (the launch's shared connection
  /// among them) are killed.
  void take_down(size_t i) {
    pid_t server = servers_.at(i)->pid();
    for (const ProcStat& process : scan_processes()) {
      if (process.ppid == server) ::kill(process.pid, SIGKILL);
    }
    stop(i);
  }

  /// Starts a stopped host's sshd again, on its address and port: the host is back.
  void restart(size_t i) { servers_.at(i) = serve(i); }

  /// One more host: an sshd in network namespace `ns` (see netns_support.hpp), on `address`.
  void add_in_namespace(const std::string& ns, const std::string& address) {
    start(address, {"/usr/sbin/ip", "netns", "exec", ns});
  }

 private:
  void keygen(const std::string& path) {
    RunResult result =
        run_to_end({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path},
                   scratch_.options(), 30s);
    INFO(result.out << result.err);
    REQUIRE(result.status.success());
  }

  void start(const std::string& address, const std::vector<std::string>& wrapper = {}) {
    std::string host_dir = dir_ + "/" + address;
    std::filesystem::create_directories(host_dir);
    keygen(host_dir + "/host_key");
    std::ofstream(host_dir + "/sshd_config")
        << "ListenAddress " << address << ":" << port_ << "\n"
        << "HostKey " << host_dir << "/host_key\n"
        << "AuthorizedKeysFile " << dir_ << "/authorized_keys\n"
        << "PidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
        << "PasswordAuthentication no\nKbdInteractiveAuthentication no\nLogLevel ERROR\n";
    addresses_.push_back(address);
    wrappers_.push_back(wrapper);
    servers_.push_back(serve(addresses_.size() - 1));
  }

  std::unique_ptr<ChildProcess> serve(size_t i) {
    const std::string& address = addresses_.at(i);
    ChildOptions options = scratch_.options();
    options.env.erase("COHORT_TEST_MARKER");  // only what cohort starts counts as left behind
    options.name = "sshd_" + address;
    std::vector<std::string> argv = wrappers_.at(i);
    for (std::string word : {"/usr/sbin/sshd", "-D", "-e", "-f"}) argv.push_back(word);
    argv.push_back(dir_ + "/" + address + "/sshd_config");
    auto server = std::make_unique<ChildProcess>(argv, options);
    INFO(server->output());
    REQUIRE(wait_until([&] { return accepts_connections(address, port_); }, 10s));
    return server;
  }

  Scratch& scratch_;
  std::string dir_;
  int port_ = 0;
  std::vector<std::string> addresses_;
  std::vector<std::vector<std::string>> wrappers_;  ///< what runs each sshd (`ip netns exec`)
  std::vector<std::unique_ptr<ChildProcess>> servers_;
};

}  // namespace cohort::test
