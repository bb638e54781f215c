// cohortd: the standalone rendezvous daemon (and optionally a plain TCPStore).
#include <iostream>
#include <stdexcept>

#include "cohort_version.hpp"  // generated: the version, commit and build type

#include "launcher/cli/rendezvous_command.hpp"
#include "launcher/options/did_you_mean.hpp"
#include "launcher/options/flag_abbreviations.hpp"
#include "launcher/options/help_format.hpp"
#include "launcher/options/run_options.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cohortd: cohort's rendezvous daemon; serves many runs at once", "cohortd"};
  cohort::DaemonCommand command;
  cohort::add_daemon_flags(app, command);
  cohort::refuse_empty_values(app);
  app.set_version_flag("--version", std::string("cohortd ") + COHORT_VERSION + " (commit " +
                                        COHORT_COMMIT + ", " + COHORT_BUILD_TYPE + " build)");
  app.allow_extras();  // an unknown word is named below, with the closest flag
  app.failure_message([](const CLI::App* top, const CLI::Error& error) {
    return cohort::parse_error_message("cohortd", error, "", top);
  });
  std::vector<std::string> flags(argv + 1, argv + argc);
  cohort::ExpandedWords expanded = cohort::expand_abbreviations(flags, cohort::flag_specs(app));
  if (!expanded.error.empty()) {
    std::cerr << "cohortd: " << expanded.error << " (cohortd --help)\n";
    return 2;
  }
  std::vector<char*> args{argv[0]};
  for (std::string& word : expanded.words) args.push_back(word.data());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  } catch (const std::out_of_range&) {
    std::cerr << cohort::out_of_range_message("cohortd", app, expanded.words);
    return 2;
  }
  if (!app.remaining().empty()) {
    std::cerr << "cohortd: "
              << cohort::unknown_argument(app.remaining().front(), cohort::flag_names(app))
              << " (cohortd --help)\n";
    return 2;
  }
  return cohort::run_daemon(command);
}
