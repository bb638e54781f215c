// cohort: the launcher's entry point. Parses the subcommand's flags, validates them (reporting
// every problem with the flag it concerns), runs, and maps the outcome to the exit code.
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

#include "agent/agent.hpp"
#include "common/log.hpp"
#include "launcher/exit_codes.hpp"
#include "launcher/run_options.hpp"

namespace {

int run_command(cohort::RunOptions& options, const std::vector<std::string>& remaining) {
  using namespace cohort;
  if (std::string error = take_command(remaining, options); !error.empty()) {
    std::cerr << "cohort run: " << error << "\n";
    return kExitUsage;
  }
  ValidatedRun validated = validate_run_options(options);
  if (!validated.problems.empty()) {
    for (const auto& problem : validated.problems) std::cerr << "cohort run: " << problem << "\n";
    return validated.config.executable.empty() && options.no_python ? kExitNotFound : kExitUsage;
  }
  log::Level level = options.quiet        ? log::Level::Error
                     : options.verbose > 1 ? log::Level::Debug
                     : options.verbose == 1 ? log::Level::Info
                                            : log::level_from_env(log::Level::Warn);
  log::init(level);
  boost::asio::io_context io;
  Agent agent(io, std::move(validated.config));
  return agent.run();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort: a fast, elastic launcher for distributed PyTorch and LibTorch training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cohort ") + COHORT_VERSION);
  cohort::RunOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run", "Run the workers of this node (a drop-in for torchrun)");
  cohort::add_run_flags(*run, run_options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : cohort::kExitUsage;
  }
  if (run->parsed()) return run_command(run_options, run->remaining());
  return cohort::kExitUsage;
}
