// The `cohortd` command (also `cohort rendezvous`): flags, the daemon and, if asked, one plain
// long-lived TCPStore, until SIGINT/SIGTERM: the control plane on the main thread's io_context,
// the stores' connections spread over --threads io threads (the main one among them).
#pragma once

#include <string>

#include "launcher/options/cli_fwd.hpp"

namespace cohort {

struct DaemonCommand {
  std::string host;  ///< empty: 0.0.0.0 with a token, 127.0.0.1 without one
  std::string token_file;
  bool insecure = false;  ///< listen beyond loopback without a token
  int port = 29400;
  std::string port_file;
  std::string store_ports;
  std::string store_quota = "1G";
  std::string store_budget = "4G";
  int tcpstore_port = -1;  ///< -1: none; 0: any free port
  std::string tcpstore_port_file;
  int http_port = -1;        ///< -1: none; 0: any free port
  std::string http_address;  ///< empty: 127.0.0.1
  std::string http_port_file;
  std::string event_log;          ///< append every event to this file; empty: none
  int threads = 0;                ///< io threads; 0: IoPool::default_threads()
  std::string store_io = "auto";  ///< auto, io_uring or epoll (SocketIo)
  int verbose = 0;
};

void add_daemon_flags(CLI::App& app, DaemonCommand& command);
int run_daemon(const DaemonCommand& command);

}  // namespace cohort
