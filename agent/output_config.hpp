// Where each worker stream goes, in torchrun's terms: --redirects (to files only), --tee (files and
// console), --local-ranks-filter (which ranks reach the console), the console line prefix, and
// cohort's raw mode (no prefix, streams inherited). Plain data and pure functions; any thread.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

namespace cohort {

constexpr int kStdout = 1;
constexpr int kStderr = 2;

/// torchrun's Std value: "0".."3" for every rank, or "0:1,1:2" per local rank.
struct StdSpec {
  int all = 0;
  std::map<int, int> per_rank;

  static std::optional<StdSpec> parse(const std::string& text);
  int for_rank(int local_rank) const;
};

struct OutputConfig {
  StdSpec redirects;
  StdSpec tee;
  std::set<int> console_ranks;  ///< empty: every local rank
  bool raw = false;             ///< no prefix; streams inherited where no file is written
  std::string prefix_template = "[${role_name}${local_rank}]:";
};

struct StreamRoute {
  bool file = false;
  bool console = false;
};

StreamRoute route_stream(const OutputConfig& config, int local_rank, int stream);

/// The console prefix of one worker, from the template's ${role_name}, ${local_rank}, ${rank}.
std::string line_prefix(const std::string& prefix_template, const std::string& role, int local_rank,
                        int rank);

}  // namespace cohort
