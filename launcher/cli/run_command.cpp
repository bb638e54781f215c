#include "launcher/cli/run_command.hpp"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>
#include <iostream>

#include "agent/agent.hpp"
#include "common/asio_clock.hpp"
#include "common/console.hpp"
#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/run_id.hpp"
#include "common/text.hpp"
#include "launcher/cli/moved_rendezvous.hpp"
#include "launcher/options/command_words.hpp"
#include "launcher/options/did_you_mean.hpp"
#include "launcher/options/log_dir_check.hpp"
#include "launcher/options/run_environment.hpp"
#include "launcher/options/run_validation.hpp"
#include "launcher/slurm/slurm_defaults.hpp"
#include "launcher/tokens/launch_token.hpp"
#include "launcher/tokens/slurm_token.hpp"
#include "launcher/tokens/token_source.hpp"
#include "process/output_pump.hpp"
#include "rendezvous/daemon.hpp"

extern char** environ;

namespace cohort {
namespace {

/// How long each --rdzv-fallback endpoint is given to say whether the run moved there.
constexpr int kMovedRunQueryMs = 1000;

// A daemon this agent may host (at --rdzv-endpoint or a --rdzv-fallback) must not be open to
// other hosts without a token.
std::string open_daemon_problem(const DaemonPlan& plan,
                                const std::vector<FallbackEndpoint>& fallbacks) {
  if (!plan.options.token.empty() || plan.insecure) return {};
  std::vector<std::string> addresses;
  if (plan.embed != DaemonPlan::Embed::No) addresses.push_back(plan.options.address);
  for (const FallbackEndpoint& fallback : fallbacks) {
    if (fallback.local) addresses.push_back(fallback.bind_address);
  }
  for (const std::string& address : addresses) {
    if (is_loopback_address(address)) continue;
    return "hosting the rendezvous on " + address +
           ": without a token anyone who reaches it can join, read and stop the run; give "
           "--token-file (or COHORT_TOKEN) on every node, or --insecure";
  }
  return {};
}

// What can only be found on this machine with the token, before joining: the token itself, and
// a daemon open to other hosts without one. Returns false after saying what is wrong.
bool local_setup_ok(const RunOptions& options, const TokenResult& token, ValidatedRun& validated) {
  validated.config.rendezvous.token = token.token;
  validated.daemon.options.token = token.token;
  validated.daemon.insecure = options.insecure;
  std::string problem = token.error;
  if (problem.empty())
    problem = open_daemon_problem(validated.daemon, validated.config.rendezvous.fallbacks);
  if (problem.empty()) return true;
  std::cerr << "cohort run: " << problem << "\n";
  return false;
}

// --http-port: where the hosted daemon serves its pages. One write, through the console as log
// lines go: never torn by them.
void say_where_http_is(const DaemonOptions& options, const RendezvousDaemon& daemon) {
  if (options.http_port < 0) return;
  console::write_message(STDERR_FILENO,
                         cat("cohort run: /metrics and the timeline pages on http://",
                             host_port_text(options.http_address, daemon.http_port()), "/\n"));
}

// Hosts the daemon this agent was planned to host. Returns false (after saying why) when it must
// but cannot; an IfFree daemon whose port is taken is simply not hosted (another agent has it).
bool start_embedded_daemon(const DaemonPlan& plan, std::unique_ptr<RendezvousDaemon>& daemon,
                           boost::asio::io_context& io, Clock& clock, AgentConfig& config) {
  if (plan.embed == DaemonPlan::Embed::No) return true;
  daemon = std::make_unique<RendezvousDaemon>(io, clock, plan.options);
  if (auto error = daemon->start()) {
    RendezvousDaemon::Listener failed = daemon->failed_listener();
    daemon.reset();
    if (plan.embed == DaemonPlan::Embed::IfFree && error == boost::asio::error::address_in_use &&
        failed == RendezvousDaemon::Listener::Control) {
      log::info("a rendezvous daemon already listens on ",
                host_port_text(plan.options.address, plan.options.port), "; joining it");
      return true;
    }
    std::cerr << "cohort run: "
              << start_failure_text(failed, plan.options, error, "cannot host the rendezvous on")
              << "\n";
    return false;
  }
  log::info("hosting the rendezvous on ", host_port_text(plan.options.address, daemon->port()));
  if (plan.embed == DaemonPlan::Embed::IfFree) {
    // Nothing listened at --rdzv-endpoint: a mistyped one would otherwise wait in silence.
    std::string endpoint = host_port_text(plan.options.address, daemon->port());
    log::warn("nothing listened at ", endpoint, " (--rdzv-endpoint), so this node now hosts the ",
              "rendezvous there: the other nodes must reach it at ", endpoint);
  }
  say_where_http_is(plan.options, *daemon);
  config.rendezvous.port = daemon->port();
  return true;
}

// The fallback daemon's --http-port, tried every kHttpRetryDelay for kHttpTries in all: when the
// lost host shared this machine, its process may hold the port a moment longer. Then the pages
// are given up (the rendezvous matters more), with a warning naming the flag.
constexpr std::chrono::milliseconds kHttpRetryDelay{50};
constexpr int kHttpTries = 40;

void serve_fallback_pages(RendezvousDaemon& daemon, const DaemonOptions& options,
                          boost::asio::io_context& io, int tries_left) {
  auto error = daemon.start_http(options.http_port);
  if (!error) return say_where_http_is(options, daemon);
  if (error == boost::asio::error::address_in_use && tries_left > 1) {
    auto timer = std::make_shared<boost::asio::steady_timer>(io, kHttpRetryDelay);
    timer->async_wait([timer, &daemon, options, &io, tries_left](auto wait_error) {
      if (!wait_error) serve_fallback_pages(daemon, options, io, tries_left - 1);
    });
    return;
  }
  log::warn(start_failure_text(RendezvousDaemon::Listener::Http, options, error, ""),
            "; hosting the rendezvous without the HTTP pages");
}

// A --rdzv-fallback endpoint of this machine, when the agent moves there: a daemon like the one
// it would host at --rdzv-endpoint (same token, quotas, store ports), unless one listens there;
// its --http-port follows once that port is free here. True when this agent hosts it.
bool host_fallback(const DaemonPlan& plan, const FallbackEndpoint& fallback,
                   std::vector<std::unique_ptr<RendezvousDaemon>>& daemons,
                   boost::asio::io_context& io, Clock& clock) {
  DaemonOptions options = plan.options;
  options.address = fallback.bind_address;
  options.port = fallback.port;
  options.http_port = -1;
  auto daemon = std::make_unique<RendezvousDaemon>(io, clock, options);
  if (auto error = daemon->start()) {
    RendezvousDaemon::Listener failed = daemon->failed_listener();
    if (error == boost::asio::error::address_in_use &&
        failed == RendezvousDaemon::Listener::Control) {
      log::info("a rendezvous daemon already listens on ",
                host_port_text(fallback.host, fallback.port), "; joining it");
    } else {
      log::error(start_failure_text(failed, options, error, "cannot host the rendezvous on"));
    }
    return false;
  }
  log::warn("hosting the rendezvous on ", host_port_text(fallback.host, fallback.port),
            " (--rdzv-fallback): the other nodes move there too");
  options.http_port = plan.options.http_port;
  if (options.http_port >= 0) serve_fallback_pages(*daemon, options, io, kHttpTries);
  daemons.push_back(std::move(daemon));
  return true;
}

// A run that moved to a --rdzv-fallback before this agent started (its rendezvous host was lost)
// is joined there: hosting a fresh daemon at --rdzv-endpoint would start a second run.
void join_a_moved_run(ValidatedRun& validated) {
  RendezvousSettings& settings = validated.config.rendezvous;
  if (settings.fallbacks.empty()) return;
  std::optional<MovedRun> moved =
      find_moved_run(settings, validated.config.env.run_id, kMovedRunQueryMs);
  if (!moved) return;
  const FallbackEndpoint& there = settings.fallbacks[moved->fallback];
  log::warn("run '", validated.config.env.run_id, "' has moved to ",
            host_port_text(there.host, there.port), " (--rdzv-fallback): ",
            moved->first_answers ? "the daemon at --rdzv-endpoint no longer has it"
                                 : "its first rendezvous host was lost",
            "; joining it there");
  settings.first_endpoint = moved->fallback + 1;
  validated.daemon.embed = DaemonPlan::Embed::No;
}

// Before exiting, an agent that hosts the daemon lets the other nodes hear the end of the run
// (at most 5 s).
void wait_for_daemon(RendezvousDaemon& daemon, boost::asio::io_context& io,
                     std::function<void()> done) {
  auto timer = std::make_shared<boost::asio::steady_timer>(io, std::chrono::seconds(5));
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  auto once = [finish, timer] {
    if (!*finish) return;
    auto call = std::move(*finish);
    *finish = nullptr;
    timer->cancel();
    call();
  };
  daemon.on_idle = once;
  if (daemon.idle()) return once();
  timer->async_wait([once](const boost::system::error_code& error) {
    if (!error) once();
  });
}

// The run's token: under cohort launch, the launcher's, which its first line on stdin carries
// (read before anything else); else --token-file, COHORT_TOKEN, or in Slurm the job's.
TokenResult run_token(const RunOptions& options, const TokenResult& launched,
                      const std::map<std::string, std::string>& env) {
  if (options.under_launch) return launched;
  TokenResult token = load_token(options.token_file, env);
  if (token.token.empty() && token.error.empty()) token = slurm_job_token(env);
  return token;
}

// Under cohort launch: says on stdout that this agent started, then waits for the launch to
// write the run's token (once every host said so) and the secrets line, whose variables it sets in
// its own environment (the workers inherit it), as `env` would have.
TokenResult launched_token(const RunOptions& options) {
  write_all(STDOUT_FILENO, ready_line(options.own_version));
  TokenResult token =
      options.token_wait_ms == 0
          ? read_token_line(STDIN_FILENO)
          : read_token_line(STDIN_FILENO, std::chrono::milliseconds(options.token_wait_ms));
  if (!token.error.empty()) return token;
  SecretsResult secrets = read_secrets_line(STDIN_FILENO);  // written with the token line
  if (!secrets.error.empty()) return {{}, secrets.error};
  for (const auto& [name, value] : secrets.variables) ::setenv(name.c_str(), value.c_str(), 1);
  return token;
}

}  // namespace

int run_command(const CLI::App& app, RunOptions& options) {
  if (std::string error =
          take_command(command_words(*app.get_parent(), app), options, "run", flag_names(app));
      !error.empty()) {
    std::cerr << "cohort run: " << error << "\n";
    return kExitUsage;
  }
  RunEnvironment machine = machine_run_environment(environ);
  options.master_port_given = app.get_option("--master-port")->count() > 0;
  SlurmApplied slurm = apply_slurm_defaults(app, options, machine.env);
  std::vector<std::string> from_env = slurm.taken;
  for (auto& line : apply_torch_env_defaults(app, options, machine.env)) {
    from_env.push_back(std::move(line));
  }
  if (options.verbose > 0) {
    for (const auto& line : from_env) std::cerr << "cohort run: " << line << "\n";
  }
  ValidatedRun validated = validate_run_options(options, machine);
  validated.config.rendezvous.refused_token_hint = slurm.refused_token_hint;
  validated.problems.insert(validated.problems.end(), slurm.problems.begin(), slurm.problems.end());
  if (!validated.problems.empty()) {
    for (const auto& problem : validated.problems) {
      std::cerr << "cohort run: " << problem << env_origin(app, problem, machine.env)
                << slurm_origin(slurm, problem) << "\n";
    }
    // 127 as a shell's, when the program not found is all that is wrong.
    bool only_not_found = validated.problems.size() == 1 && validated.config.executable.empty() &&
                          options.no_python && !options.module;
    return only_not_found ? kExitNotFound : kExitUsage;
  }
  if (std::string problem = log_dir_problem(validated.config.log_dir); !problem.empty()) {
    std::cerr << "cohort run: " << problem << "\n";
    return kExitUsage;
  }
  // Under cohort launch, what this node can find wrong by itself is said before it is ready: a
  // host that cannot run its part keeps every host from starting.
  TokenResult launched = options.under_launch ? launched_token(options) : TokenResult{};
  if (!launched.error.empty()) {
    std::cerr << "cohort run: " << launched.error << "\n";
    return kExitUsage;
  }
  if (!local_setup_ok(options, run_token(options, launched, machine.env), validated)) {
    return kExitUsage;
  }
  log::init(log_level_for(options));
  for (const auto& warning : validated.warnings) log::warn(warning);
  for (const auto& note : validated.notes) log::info(note);
  join_a_moved_run(validated);
  boost::asio::io_context io;
  AsioClock clock(io);
  std::vector<std::unique_ptr<RendezvousDaemon>> daemons(1);  // --rdzv-endpoint's, fallbacks'
  if (!start_embedded_daemon(validated.daemon, daemons[0], io, clock, validated.config))
    return kExitRendezvous;
  if (!daemons[0]) daemons.clear();
  validated.config.hosts_rendezvous = !daemons.empty();
  validated.config.host_fallback = [&daemons, &io, &clock,
                                    plan = validated.daemon](const FallbackEndpoint& fallback) {
    return host_fallback(plan, fallback, daemons, io, clock);
  };
  validated.config.before_exit = [&daemons, &io](std::function<void()> done) {
    if (daemons.empty()) return done();
    wait_for_daemon(*daemons.back(), io, std::move(done));
  };
  validated.config.after_pause = [&daemons] {
    for (auto& daemon : daemons) daemon->continue_after_pause();
  };
  Agent agent(io, std::move(validated.config));
  return agent.run();
}

}  // namespace cohort
