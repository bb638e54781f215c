#include "launcher/options/help_format.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/text.hpp"

namespace cohort {

std::string ScriptUsageFormatter::make_usage(const CLI::App* app, std::string name) const {
  std::string usage = CLI::Formatter::make_usage(app, std::move(name));
  while (!usage.empty() && usage.back() == '\n') usage.pop_back();
  return usage + " SCRIPT [ARGS...]\n";
}

namespace {

// The option `name` of `app` or of one of its subcommands; nullptr if none.
const CLI::Option* option_named(const CLI::App& app, const std::string& name) {
  if (const CLI::Option* option = app.get_option_no_throw(name)) return option;
  for (const CLI::App* command : app.get_subcommands({})) {
    if (const CLI::Option* option = option_named(*command, name)) return option;
  }
  return nullptr;
}

// CLI11's conversion error, "Could not convert: NAME = VALUE", as what was expected instead.
std::string conversion_text(const std::string& what, const CLI::App* app) {
  const std::string prefix = "Could not convert: ";
  size_t equals = what.find(" = ");
  if (what.rfind(prefix, 0) != 0 || equals == std::string::npos) return what;
  std::string name = what.substr(prefix.size(), equals - prefix.size());
  std::string value = what.substr(equals + 3);
  const CLI::Option* option = app != nullptr ? option_named(*app, name) : nullptr;
  std::string expected = "a number";
  if (option != nullptr && option->get_expected_max() == 0) {
    expected = "true or false";  // a flag, given "--json=maybe"
  } else if (parse_double(value) && value.find_first_of(".eE") != std::string::npos) {
    expected = "a whole number";  // "--threads 1.5"
  }
  return name + ": expected " + expected + ", got '" + value + "'";
}

}  // namespace

std::string parse_error_message(const std::string& command, const CLI::Error& error,
                                const std::string& note, const CLI::App* app) {
  return command + ": " + conversion_text(error.what(), app) + note + " (" + command + " --help)\n";
}

namespace {

// An integer that does not fit in 64 bits.
bool overflows(const std::string& text) {
  size_t first_digit = text.find_first_not_of("+-") == 1 ? 1 : 0;  // after one sign
  if (text.empty() || text.find_first_not_of("0123456789", first_digit) != std::string::npos) {
    return false;
  }
  errno = 0;
  std::strtoll(text.c_str(), nullptr, 10);
  return errno == ERANGE;
}

// The PET_ variable of `app` or of its subcommands whose value overflows, if any.
std::string overflowing_variable(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    const std::string& name = option->get_envname();
    const char* value = name.empty() ? nullptr : std::getenv(name.c_str());
    if (value != nullptr && overflows(value)) return name + "=" + value;
  }
  for (const CLI::App* command : app.get_subcommands({})) {
    if (std::string found = overflowing_variable(*command); !found.empty()) return found;
  }
  return {};
}

}  // namespace

std::string out_of_range_message(const std::string& command, const CLI::App& app,
                                 const std::vector<std::string>& words) {
  std::string culprit;
  for (const std::string& word : words) {
    size_t equals = word.find('=');
    if (word.rfind('-', 0) == 0 && equals != std::string::npos &&
        overflows(word.substr(equals + 1))) {
      culprit = word;
      break;
    }
  }
  if (culprit.empty()) culprit = overflowing_variable(app);
  if (culprit.empty()) culprit = "a number on the command line";
  return command + ": " + culprit + ": out of range (" + command + " --help)\n";
}

namespace {

CLI::Validator within(double min, double max, const std::string& what, bool whole) {
  auto check = [min, max, what, whole](std::string& text) -> std::string {
    char* end = nullptr;
    errno = 0;
    double value = std::strtod(text.c_str(), &end);
    bool number = !text.empty() && end == text.c_str() + text.size() && errno == 0 &&
                  (!whole || value == std::floor(value));
    if (number && value >= min && value <= max) return "";
    char range[64];
    std::snprintf(range, sizeof range, "from %.15g to %.15g", min, max);
    return "expected " + what + " " + range + ", got '" + text + "'";
  };
  return CLI::Validator(check, "");
}

}  // namespace

CLI::Validator number_within(double min, double max, const std::string& what) {
  return within(min, max, what, false);
}

CLI::Validator whole_number_within(int64_t min, int64_t max, const std::string& what) {
  return within(static_cast<double>(min), static_cast<double>(max), what, true);
}

}  // namespace cohort
