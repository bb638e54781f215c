#include "launcher/options/help_format.hpp"

namespace cohort {

std::string ScriptUsageFormatter::make_usage(const CLI::App* app, std::string name) const {
  std::string usage = CLI::Formatter::make_usage(app, std::move(name));
  while (!usage.empty() && usage.back() == '\n') usage.pop_back();
  return usage + " SCRIPT [ARGS...]\n";
}

std::string parse_error_message(const std::string& command, const CLI::Error& error) {
  return command + ": " + error.what() + " (" + command + " --help)\n";
}

}  // namespace cohort
