// The training command that follows a subcommand's flags: `cohort run [flags] script args` or
// `cohort run [flags] -- script args`. Main thread, at start.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace cohort {

// The script and its arguments. After "--" CLI11 hands them to the top-level app (which allows
// extras for that reason), otherwise to the subcommand.
inline std::vector<std::string> command_words(const CLI::App& top, const CLI::App& sub) {
  std::vector<std::string> words = sub.remaining();
  if (words.empty() && !top.remaining().empty()) {
    words = top.remaining();
    words.insert(words.begin(), "--");
  }
  return words;
}

}  // namespace cohort
