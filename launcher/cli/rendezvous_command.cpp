#include "launcher/cli/rendezvous_command.hpp"

#include <sys/stat.h>
#include <CLI/CLI.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

#include "agent/worker_env.hpp"
#include "common/asio_clock.hpp"
#include "common/event_log.hpp"
#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "common/io_pool.hpp"
#include "common/log.hpp"
#include "common/signal_blocking.hpp"
#include "common/text.hpp"
#include "launcher/options/byte_size.hpp"
#include "launcher/options/help_format.hpp"
#include "launcher/tokens/token_source.hpp"
#include "rendezvous/daemon.hpp"
#include "store/store_server.hpp"

extern char** environ;

namespace cohort {
namespace {

bool parse_range(const std::string& text, DaemonOptions& options) {
  if (text.empty()) return true;
  auto range = parse_port_range(text);
  if (!range) return false;
  std::tie(options.store_port_min, options.store_port_max) = *range;
  return true;
}

// Writes the port through a temporary file, so that a reader never sees half of it. An empty
// path writes nothing. False (errno says why) when the file cannot be written.
bool write_port_file(const std::string& path, int port) {
  if (path.empty()) return true;
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    if (!out) return false;
    out << port << "\n";
    if (!out.flush()) return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

// Checks before listening that a port file can be written there (a launcher waits on it): its
// temporary file can be created, and the rename onto `path` will not meet a directory.
bool port_file_writable(const std::string& path) {
  if (path.empty()) return true;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    errno = EISDIR;
    return false;
  }
  std::string temporary = path + ".tmp";
  if (!std::ofstream(temporary)) return false;
  std::remove(temporary.c_str());
  return true;
}

int port_file_error(std::string_view flag, const std::string& path) {
  std::cerr << "cohortd: " << flag << ": cannot write '" << path << "': " << std::strerror(errno)
            << "\n";
  return kExitUsage;
}

// Where to listen: anywhere with a token; without one, loopback only unless --insecure says
// otherwise. Returns false (after saying why) for a non-loopback --host without either.
bool choose_host(const DaemonCommand& command, bool has_token, std::string& host) {
  if (command.host.empty()) {
    host = has_token || command.insecure ? "0.0.0.0" : "127.0.0.1";
    if (!has_token && !command.insecure) {
      std::cerr << "cohortd: no token (--token-file or COHORT_TOKEN): listening on 127.0.0.1 "
                   "only; give a token, or --insecure, to serve other hosts\n";
    }
    return true;
  }
  host = command.host;
  if (has_token || command.insecure || is_loopback_address(host)) return true;
  std::cerr << "cohortd: --host " << host
            << ": without a token anyone who reaches this address can join, read and stop "
               "every run; give --token-file (or COHORT_TOKEN), or --insecure\n";
  return false;
}

// --http-port and --http-address: a port in range, an IP literal, and beyond loopback a token
// (which requests then carry) or --insecure.
bool http_options(const DaemonCommand& command, bool has_token, DaemonOptions& options) {
  if (command.http_port < -1 || command.http_port > 65535) {
    std::cerr << "cohortd: --http-port: expected 0..65535, got " << command.http_port << "\n";
    return false;
  }
  options.http_port = command.http_port;
  if (!command.http_address.empty()) options.http_address = command.http_address;
  boost::system::error_code error;
  auto address = boost::asio::ip::make_address(options.http_address, error);
  if (error) {
    std::cerr << "cohortd: --http-address: expected an IP address, got '" << options.http_address
              << "'\n";
    return false;
  }
  if (options.http_port < 0 || address.is_loopback() || has_token || command.insecure) return true;
  std::cerr << "cohortd: --http-address " << options.http_address
            << ": without a token anyone who reaches it can read every run; give --token-file "
               "(or COHORT_TOKEN), or --insecure\n";
  return false;
}

}  // namespace

void add_daemon_flags(CLI::App& app, DaemonCommand& command) {
  app.add_option("--host", command.host,
                 "Address to listen on (0.0.0.0, ::, or one address; default 0.0.0.0 with a "
                 "token, else 127.0.0.1)");
  app.add_option("--token-file", command.token_file,
                 "The shared secret agents and `cohort status` must prove they hold (a file only "
                 "its owner can read; default: $COHORT_TOKEN)");
  app.add_flag("--insecure", command.insecure,
               "Listen beyond loopback without a token (anyone who reaches it can steer runs)");
  app.add_option("--port", command.port, "Control port for agents (0: any free port)")
      ->capture_default_str()
      ->check(whole_number_within(0, 65535, "a port"));
  app.add_option("--port-file", command.port_file, "Write the bound control port to this file");
  app.add_option("--store-ports", command.store_ports,
                 "Ports for the per-round worker stores, e.g. 29500-29599 (default: any free)");
  app.add_option("--store-quota", command.store_quota,
                 "Bytes each round's worker store may hold (keys, values, queues), with an "
                 "optional K, M or G suffix")
      ->capture_default_str();
  app.add_option("--store-budget", command.store_budget,
                 "Bytes all the worker stores may hold together (the rounds' of every run and "
                 "--tcpstore-port's), so that many runs cannot each fill a quota")
      ->capture_default_str();
  app.add_option("--tcpstore-port", command.tcpstore_port,
                 "Also serve one plain, long-lived TCPStore on this port (0: any free port)")
      ->check(whole_number_within(0, 65535, "a port"));
  app.add_option("--tcpstore-port-file", command.tcpstore_port_file,
                 "Write the bound TCPStore port to this file");
  app.add_option("--http-port", command.http_port,
                 "Serve /metrics (Prometheus), the runs and timeline pages on this port (0: any "
                 "free port; default: off)")
      ->type_name("PORT")
      ->check(whole_number_within(0, 65535, "a port"));  // -1, off, is the default's alone
  app.add_option("--http-address", command.http_address,
                 "Where the HTTP port listens (default 127.0.0.1; beyond loopback it needs a "
                 "token, or --insecure). With a token every request sends it as a bearer token");
  app.add_option("--http-port-file", command.http_port_file, "Write the bound HTTP port here");
  app.add_option("--event-log", command.event_log,
                 "Append every run's events to this file (JSON lines, docs/EVENTS.md)");
  app.add_option("--threads", command.threads,
                 "Threads serving the worker stores' connections, the main one included "
                 "(default: one per core, at most 16); the control plane stays on the main one")
      ->type_name("N");
  app.add_option("--store-io", command.store_io,
                 "How the store threads read and write: io_uring (one system call per batch of "
                 "requests), epoll (three per request), or auto: io_uring where the kernel allows "
                 "it (default)")
      ->type_name("auto|io_uring|epoll");
  app.add_flag("-v,--verbose", command.verbose, "Log runs, rounds and nodes");
}

namespace {

std::optional<SocketIo> store_io(const std::string& name) {
  if (name == "auto") return SocketIo::Auto;
  if (name == "io_uring") return SocketIo::IoUring;
  if (name == "epoll") return SocketIo::Epoll;
  return std::nullopt;
}

// Every flag checked before anything listens; nullopt (after saying why) on a usage error.
std::optional<DaemonOptions> daemon_options(const DaemonCommand& command) {
  TokenResult token = load_token(command.token_file, parse_environ(environ));
  if (!token.error.empty()) {
    std::cerr << "cohortd: " << token.error << "\n";
    return std::nullopt;
  }
  DaemonOptions options;
  if (!choose_host(command, !token.token.empty(), options.address)) return std::nullopt;
  options.token = token.token;
  options.port = static_cast<uint16_t>(command.port);
  if (!parse_range(command.store_ports, options)) {
    std::cerr << "cohortd: --store-ports: expected PORT or FIRST-LAST, got '" << command.store_ports
              << "'\n";
    return std::nullopt;
  }
  for (auto [flag, text, bytes] :
       {std::tuple{"--store-quota", command.store_quota, &options.store_quota_bytes},
        std::tuple{"--store-budget", command.store_budget, &options.store_budget_bytes}}) {
    auto size = parse_byte_size(text);
    if (!size) {
      std::cerr << "cohortd: " << byte_size_problem(flag, text) << "\n";
      return std::nullopt;
    }
    *bytes = *size;
  }
  if (options.store_budget_bytes < options.store_quota_bytes) {
    std::cerr << "cohortd: warning: --store-budget " << command.store_budget
              << " is below --store-quota " << command.store_quota
              << ": a round's worker store holds at most the budget\n";
  }
  if (command.threads < 0 || command.threads > IoPool::kMaxThreads) {
    std::cerr << "cohortd: --threads: expected 1.." << IoPool::kMaxThreads
              << " (0: one per core), got " << command.threads << "\n";
    return std::nullopt;
  }
  if (!store_io(command.store_io)) {
    std::cerr << "cohortd: --store-io: expected auto, io_uring or epoll, got '" << command.store_io
              << "'\n";
    return std::nullopt;
  }
  if (!http_options(command, !token.token.empty(), options)) return std::nullopt;
  if (!command.event_log.empty()) {
    if (std::string problem = event_log_problem(command.event_log); !problem.empty()) {
      std::cerr << "cohortd: --event-log: " << problem << "\n";
      return std::nullopt;
    }
    options.event_log = command.event_log;
  }
  for (const auto& [flag, path] : {std::pair{"--port-file", command.port_file},
                                   std::pair{"--tcpstore-port-file", command.tcpstore_port_file},
                                   std::pair{"--http-port-file", command.http_port_file}}) {
    if (!port_file_writable(path)) {
      port_file_error(flag, path);
      return std::nullopt;
    }
  }
  return options;
}

// --tcpstore-port: one plain, long-lived store. Its allowed peers stay unset: it serves whoever
// can reach the port, as torchrun's own would (there is no round whose nodes could be named).
int start_plain_store(boost::asio::io_context& io, const DaemonCommand& command,
                      const DaemonOptions& options, std::shared_ptr<ByteBudget> budget,
                      std::unique_ptr<StoreServer>& tcpstore) {
  StoreServerOptions store_options;
  store_options.io_pool = options.store_pool;
  store_options.address = options.address == "0.0.0.0" ? "" : options.address;
  store_options.port = static_cast<uint16_t>(command.tcpstore_port);
  store_options.limits.quota_bytes = options.store_quota_bytes;
  store_options.budget = std::move(budget);
  tcpstore = std::make_unique<StoreServer>(io, store_options);
  if (auto error = tcpstore->start()) {
    std::cerr << "cohortd: --tcpstore-port " << command.tcpstore_port << ": " << error.message()
              << "\n";
    return kExitInternal;
  }
  std::cout << "cohortd: TCPStore on " << host_port_text(options.address, tcpstore->port())
            << std::endl;
  if (!write_port_file(command.tcpstore_port_file, tcpstore->port())) {
    return port_file_error("--tcpstore-port-file", command.tcpstore_port_file);
  }
  return kExitSuccess;
}

}  // namespace

int run_daemon(const DaemonCommand& command) {
  log::init(command.verbose > 1    ? log::Level::Debug
            : command.verbose == 1 ? log::Level::Info
                                   : log::level_from_env(log::Level::Warn));
  std::optional<DaemonOptions> options = daemon_options(command);
  if (!options) return kExitUsage;
  boost::asio::io_context io;
  AsioClock clock(io);
  // Declared before the daemon and the store, destroyed after them: their connections' handlers
  // live in its contexts.
  SocketIo socket_io = *store_io(command.store_io);
  IoPool pool(io, command.threads > 0 ? command.threads : IoPool::default_threads(), socket_io);
  if (socket_io == SocketIo::IoUring && !pool.uses_io_uring()) {
    std::cerr << "cohortd: --store-io io_uring: " << pool.io_uring_unavailable()
              << " (--store-io epoll or auto serves without it)\n";
    return kExitInternal;
  }
  if (pool.uses_io_uring()) {
    log::info("store: ", pool.size(), " io threads, through io_uring");
  } else {
    log::info("store: ", pool.size(), " io threads, through epoll",
              pool.io_uring_unavailable().empty() ? "" : ": " + pool.io_uring_unavailable());
  }
  options->store_pool = &pool;
  RendezvousDaemon daemon(io, clock, *options);
  if (auto error = daemon.start()) {
    std::cerr << "cohortd: "
              << start_failure_text(daemon.failed_listener(), *options, error,
                                    "--port " + std::to_string(command.port) + ": cannot listen on")
              << "\n";
    return kExitInternal;
  }
  // Every listener is up before the ports are announced: a port file names a daemon that runs.
  std::unique_ptr<StoreServer> tcpstore;
  if (command.tcpstore_port >= 0) {
    if (int failed = start_plain_store(io, command, *options, daemon.store_budget(), tcpstore))
      return failed;
  }
  std::cout << "cohortd: listening on " << host_port_text(options->address, daemon.port())
            << std::endl;
  if (!write_port_file(command.port_file, daemon.port())) {
    return port_file_error("--port-file", command.port_file);
  }
  if (options->http_port >= 0) {
    std::cout << "cohortd: HTTP on " << host_port_text(options->http_address, daemon.http_port())
              << " (/metrics, /, /runs/ID, /api/runs)" << std::endl;
    if (!write_port_file(command.http_port_file, daemon.http_port())) {
      return port_file_error("--http-port-file", command.http_port_file);
    }
  }

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  int exit_code = 0;
  signals.async_wait([&](const boost::system::error_code& error, int signal) {
    if (error) return;
    exit_code = 128 + signal;
    daemon.stop();
    if (tcpstore) tcpstore->stop();
    io.stop();
  });
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);  // the terminal it was started from closing ends no run
  io.run();
  block_signals_until_exit();  // a second signal must not end the daemon's orderly close
  return exit_code;
}

}  // namespace cohort
