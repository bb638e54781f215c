// Where each worker stream goes, in torchrun's terms: --redirects (to files only), --tee (files and
// console), --local-ranks-filter (which ranks reach the console), --duplicate-*-filters (lines
// also copied to filtered_std*.log), the console line prefix, and cohort's raw mode (no prefix,
// streams inherited). Plain data and pure functions; any thread.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

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
  std::vector<std::string> stdout_filters;  ///< --duplicate-stdout-filters; empty: no copy
  std::vector<std::string> stderr_filters;
};

struct StreamRoute {
  bool file = false;
  bool console = false;
};

StreamRoute route_stream(const OutputConfig& config, int local_rank, int stream);

/// Whether any of `nproc` workers has a stream written to a file (--redirects, --tee) or lines
/// copied to one (--duplicate-*-filters): files the user asked for.
bool writes_worker_files(const OutputConfig& config, int nproc);

/// The console prefix of one worker, from the template's ${role_name}, ${local_rank}, ${rank}
/// and ${hostname}; ${pid} is left for the output pump, which knows the worker's pid.
std::string line_prefix(const std::string& prefix_template, const std::string& role, int local_rank,
                        int rank, const std::string& host_name);

/// torchrun's filter list: "a,b" -> {a, b}, ",," is a literal comma; empty items are dropped.
std::vector<std::string> parse_filter_list(const std::string& text);

}  // namespace cohort
