// cohort: the launcher's entry point. Parses the subcommand's flags, validates them (reporting
// every problem with the flag it concerns), runs, and maps the outcome to the exit code.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdlib>
#include <iostream>

#include "agent/agent.hpp"
#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/launch.hpp"
#include "launcher/launch_plan.hpp"
#include "launcher/run_options.hpp"
#include "launcher/status_command.hpp"
#include "rendezvous/daemon.hpp"
#include "rendezvous/daemon_main.hpp"

extern char** environ;

namespace {

using namespace cohort;

// Hosts the daemon this agent was planned to host. Returns false (after saying why) when it must
// but cannot; an IfFree daemon whose port is taken is simply not hosted (another agent has it).
bool start_embedded_daemon(const DaemonPlan& plan, std::unique_ptr<RendezvousDaemon>& daemon,
                           boost::asio::io_context& io, AgentConfig& config) {
  if (plan.embed == DaemonPlan::Embed::No) return true;
  daemon = std::make_unique<RendezvousDaemon>(io, plan.options);
  if (auto error = daemon->start()) {
    daemon.reset();
    if (plan.embed == DaemonPlan::Embed::IfFree && error == boost::asio::error::address_in_use) {
      log::info("a rendezvous daemon already listens on ", plan.options.address, ":",
                plan.options.port, "; joining it");
      return true;
    }
    std::cerr << "cohort run: cannot host the rendezvous on " << plan.options.address << ":"
              << plan.options.port << ": " << error.message() << "\n";
    return false;
  }
  log::info("hosting the rendezvous on ", plan.options.address, ":", daemon->port());
  config.rendezvous.port = daemon->port();
  return true;
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
  daemon.on_run_ended = [&daemon, once] {
    if (daemon.idle()) once();
  };
  if (daemon.idle()) return once();
  timer->async_wait([once](const boost::system::error_code& error) {
    if (!error) once();
  });
}

// The script and its arguments. After "--" CLI11 hands them to the top-level app (which allows
// extras for that reason), otherwise to the subcommand.
std::vector<std::string> command_words(const CLI::App& top, const CLI::App& sub) {
  std::vector<std::string> words = sub.remaining();
  if (words.empty() && !top.remaining().empty()) {
    words = top.remaining();
    words.insert(words.begin(), "--");
  }
  return words;
}

int run_command(const CLI::App& app, RunOptions& options) {
  if (std::string error = take_command(command_words(*app.get_parent(), app), options);
      !error.empty()) {
    std::cerr << "cohort run: " << error << "\n";
    return kExitUsage;
  }
  std::vector<std::string> slurm_problems;
  std::vector<std::string> from_slurm =
      apply_slurm_defaults(app, options, parse_environ(environ), slurm_problems);
  if (options.verbose > 0) {
    for (const auto& line : from_slurm) std::cerr << "cohort run: " << line << "\n";
  }
  ValidatedRun validated = validate_run_options(options);
  validated.problems.insert(validated.problems.end(), slurm_problems.begin(), slurm_problems.end());
  if (!validated.problems.empty()) {
    for (const auto& problem : validated.problems) std::cerr << "cohort run: " << problem << "\n";
    return validated.config.executable.empty() && options.no_python ? kExitNotFound : kExitUsage;
  }
  log::init(log_level_for(options));
  boost::asio::io_context io;
  std::unique_ptr<RendezvousDaemon> daemon;
  if (!start_embedded_daemon(validated.daemon, daemon, io, validated.config))
    return kExitRendezvous;
  if (daemon) {
    RendezvousDaemon* hosted = daemon.get();
    validated.config.before_exit = [hosted, &io](std::function<void()> done) {
      wait_for_daemon(*hosted, io, std::move(done));
    };
  }
  Agent agent(io, std::move(validated.config));
  return agent.run();
}

LaunchContext launch_context() {
  LaunchContext context;
  for (const auto& [name, value] : parse_environ(environ)) context.env[name] = value;
  char buffer[4096] = {};
  if (::getcwd(buffer, sizeof buffer - 1) != nullptr) context.working_dir = buffer;
  ssize_t size = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  context.own_path = size > 0 ? std::string(buffer, static_cast<size_t>(size)) : "cohort";
  const char* home = std::getenv("HOME");
  context.home = home ? home : "";
  return context;
}

int launch_command(const CLI::App& app, LaunchOptions& options) {
  if (std::string error = take_command(command_words(*app.get_parent(), app), options.run);
      !error.empty()) {
    std::cerr << "cohort launch: " << error << "\n";
    return kExitUsage;
  }
  LaunchPlan plan = plan_launch(app, options, launch_context());
  if (!plan.problems.empty()) {
    for (const auto& problem : plan.problems) std::cerr << "cohort launch: " << problem << "\n";
    return kExitUsage;
  }
  log::init(plan.log_level);
  boost::asio::io_context io;
  Launch launch(io, std::move(plan));
  return launch.run();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort: a fast, elastic launcher for distributed PyTorch and LibTorch training"};
  app.require_subcommand(1);
  app.allow_extras();  // "cohort run -- script args": after "--" the words land here
  app.set_version_flag("--version", std::string("cohort ") + COHORT_VERSION);

  RunOptions run_options;
  CLI::App* run =
      app.add_subcommand("run", "Run the workers of this node (a drop-in for torchrun)");
  add_run_flags(*run, run_options);

  LaunchOptions launch_options;
  CLI::App* launch = app.add_subcommand(
      "launch", "Run `cohort run` on several hosts over ssh, from this machine (like mpirun)");
  add_launch_flags(*launch, launch_options);

  DaemonCommand daemon_command;
  CLI::App* rendezvous =
      app.add_subcommand("rendezvous", "Run the rendezvous daemon (the same as cohortd)");
  add_daemon_flags(*rendezvous, daemon_command);

  std::string endpoint = "127.0.0.1:29400";
  bool json = false;
  CLI::App* status = app.add_subcommand("status", "Show what a rendezvous daemon knows");
  status->add_option("--rdzv-endpoint,--rdzv_endpoint", endpoint, "host[:port] of the daemon")
      ->capture_default_str();
  status->add_flag("--json", json, "Print the raw JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitSuccess : kExitUsage;
  }
  if (run->parsed()) return run_command(*run, run_options);
  if (launch->parsed()) return launch_command(*launch, launch_options);
  if (!app.remaining().empty()) {
    std::cerr << "cohort: unexpected arguments: " << CLI::detail::join(app.remaining(), " ")
              << "\n";
    return kExitUsage;
  }
  if (rendezvous->parsed()) return run_daemon(daemon_command);
  if (status->parsed()) return run_status_command(endpoint, json, 5000);
  return kExitUsage;
}
