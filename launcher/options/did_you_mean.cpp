#include "launcher/options/did_you_mean.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>

namespace cohort {
namespace {

// Optimal string alignment distance: Levenshtein plus the swap of two neighbouring characters.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitute = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::min<size_t>(2, word.size() / 3);
  for (const std::string& candidate : candidates) {
    size_t distance = edit_distance(word, candidate);
    if (distance <= best_distance && (best.empty() || distance < best_distance)) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::vector<std::string> flag_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

std::string unknown_argument(const std::string& word, const std::vector<std::string>& candidates) {
  std::string flag = word.substr(0, word.find('='));
  std::string text = "unknown argument '" + word + "'";
  if (std::string close = closest_name(flag, candidates); !close.empty()) {
    text += " (did you mean " + close + "?)";
  }
  return text;
}

}  // namespace cohort
