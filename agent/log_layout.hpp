// The per-run log directory, torchrun's layout: <log-dir>/<run-id>_<random>/attempt_<n>/
// <local_rank>/{stdout.log,stderr.log,error.json}, attempt_<n>/filtered_{stdout,stderr}.log
// (--duplicate-*-filters) and attempt_<n>/hang-rank<R>.txt for a hung worker's stacks. The
// random suffix makes the directory this agent's alone: nodes that share a --log-dir (a network
// filesystem) and later runs under the same id never write into, or read, one another's files.
// Without --log-dir it lives in a fresh temporary directory that is removed when the run ends
// (kept when the workers' output goes to files);
// "/dev/null" turns files off. The run id is made one safe path component
// (run_id_path_component), so logs never land outside the base directory. Owned by the agent;
// io thread only.
#pragma once

#include <string>

namespace cohort {

class LogLayout {
 public:
  /// `base_dir` empty: a temporary directory under $TMPDIR (or /tmp).
  LogLayout(std::string base_dir, std::string run_id);
  ~LogLayout();
  LogLayout(const LogLayout&) = delete;
  LogLayout& operator=(const LogLayout&) = delete;

  bool enabled() const { return enabled_; }
  /// No --log-dir: the directory is removed when the run ends, unless kept.
  bool temporary() const { return temporary_; }
  /// The temporary directory stays after the run (files the user asked for are in it).
  void keep() { temporary_ = false; }
  /// Where the logs go: --log-dir, or the temporary directory.
  const std::string& base_dir() const { return base_dir_; }
  /// Creates attempt_<attempt>/<0..nproc-1>, emptied first should that attempt number come
  /// again (as torchrun does). Returns an error message, empty on success.
  std::string prepare_attempt(int attempt, int nproc);
  std::string rank_dir(int attempt, int local_rank) const;
  /// attempt_<attempt>, which holds the rank dirs and a hung worker's hang-rank<R>.txt; empty
  /// when files are off.
  std::string attempt_dir(int attempt) const;
  std::string error_file(int attempt, int local_rank) const;
  /// <base>/<run-id>_<random>: empty when it could not be made (prepare_attempt says why).
  const std::string& run_dir() const { return run_dir_; }

 private:
  bool enabled_ = true;
  bool temporary_ = false;
  std::string base_dir_;
  std::string run_dir_;
  std::string problem_;  ///< why run_dir_ could not be made
};

}  // namespace cohort
