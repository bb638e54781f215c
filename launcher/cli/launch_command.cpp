#include "launcher/cli/launch_command.hpp"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <iostream>

#include "agent/worker_env.hpp"
#include "common/asio_clock.hpp"
#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/launch/launch.hpp"
#include "launcher/options/command_words.hpp"
#include "launcher/options/did_you_mean.hpp"
#include "launcher/tokens/launch_token.hpp"
#include "process/child_reaper.hpp"
#include "process/posix_process_spawner.hpp"
#include "process/process_spawner.hpp"

extern char** environ;

namespace cohort {
namespace {

LaunchContext launch_context() {
  LaunchContext context;
  for (const auto& [name, value] : parse_environ(environ)) context.env[name] = value;
  char buffer[4096] = {};
  if (::getcwd(buffer, sizeof buffer - 1) != nullptr) context.working_dir = buffer;
  ssize_t size = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  context.own_path = size > 0 ? std::string(buffer, static_cast<size_t>(size)) : "cohort";
  const char* home = std::getenv("HOME");
  context.home = home ? home : "";
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  context.host_name = name;
  const char* path = std::getenv("PATH");
  std::string srun = find_executable("srun", path ? path : "");
  context.has_srun = !srun.empty() && ::access(srun.c_str(), X_OK) == 0;
  return context;
}

}  // namespace

int launch_command(const CLI::App& app, LaunchOptions& options) {
  if (std::string error = take_command(command_words(*app.get_parent(), app), options.run, "launch",
                                       flag_names(app));
      !error.empty()) {
    std::cerr << "cohort launch: " << error << "\n";
    return kExitUsage;
  }
  LaunchContext context = launch_context();
  LaunchPlan plan = plan_launch(app, options, context);
  TokenResult token = launch_token(options.run.token_file, context.env, plan.rdzv_endpoint.empty());
  if (!token.error.empty()) plan.problems.push_back(token.error);
  if (!plan.problems.empty()) {
    for (const auto& problem : plan.problems) std::cerr << "cohort launch: " << problem << "\n";
    return kExitUsage;
  }
  plan.token = plan.daemon.token = token.token;
  log::init(plan.log_level);
  boost::asio::io_context io;
  AsioClock clock(io);
  ChildReaper reaper(io);
  PosixProcessSpawner spawner(io, reaper);
  Launch launch(io, clock, spawner, std::move(plan));
  return launch.run();
}

}  // namespace cohort
