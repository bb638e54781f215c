// What `--help` and a parse error print: the usage line of a command that takes a training script
// ("Usage: cohort run [OPTIONS] SCRIPT [ARGS...]"), and an error that points at the command's own
// --help ("cohort launch: ... (cohort launch --help)"). Set on the CLI11 commands by main; main
// thread at start.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace cohort {

/// CLI11's formatter with a usage line that ends in the script and its arguments.
class ScriptUsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override;
};

/// A parse error of `command` ("cohort run", "cohortd"), pointing at its --help.
std::string parse_error_message(const std::string& command, const CLI::Error& error);

/// CLI11 2.1 lets std::out_of_range escape parse() when a flag is given a count past 64 bits
/// (--verbose=99999999999999999999, or in PET_VERBOSE): the error for it, naming the word or the
/// variable of `app` (or of its subcommands) that holds the number.
std::string out_of_range_message(const std::string& command, const CLI::App& app,
                                 const std::vector<std::string>& words);

}  // namespace cohort
