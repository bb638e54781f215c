// What `--help` and a parse error print: the usage line of a command that takes a training script
// ("Usage: cohort run [OPTIONS] SCRIPT [ARGS...]"), and an error that points at the command's own
// --help ("cohort launch: ... (cohort launch --help)"). Set on the CLI11 commands by main; main
// thread at start.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

/// CLI11's formatter with a usage line that ends in the script and its arguments.
class ScriptUsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override;
};

/// A parse error of `command` ("cohort run", "cohortd"), then `note`, pointing at its --help.
/// CLI11's "Could not convert: --threads = abc" is said as "--threads: expected a whole number,
/// got 'abc'" (of a flag of `app` or its subcommands that takes no value: "true or false").
std::string parse_error_message(const std::string& command, const CLI::Error& error,
                                const std::string& note = "", const CLI::App* app = nullptr);

/// CLI11 2.1 lets std::out_of_range escape parse() when a flag is given a count past 64 bits
/// (--verbose=99999999999999999999, or in PET_VERBOSE): the error for it, naming the word or the
/// variable of `app` (or of its subcommands) that holds the number.
std::string out_of_range_message(const std::string& command, const CLI::App& app,
                                 const std::vector<std::string>& words);

/// A flag's check that its value is a number from `min` to `max`, failing with
/// "expected <what> from <min> to <max>, got '<value>'" (CLI11's own says "Value abc not in range
/// 0.200000 to 3600.000000", even of a word).
CLI::Validator number_within(double min, double max, const std::string& what);
/// The same for a whole number (a port).
CLI::Validator whole_number_within(int64_t min, int64_t max, const std::string& what);

}  // namespace cohort
