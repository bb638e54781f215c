// Writes NCCL flight-recorder dumps for tests, byte for byte in the shape PyTorch 2.11 writes
// them (tests/data/flight_recorder/: pickle protocol 2; the top dict's version, pg_config,
// comm_lib_version, pg_status and entries; each entry's keys in PyTorch's order and types; each
// string memoized at its first use and fetched after), for a rank with chosen process groups and
// collectives. Pure; a test's own; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cohort::test {

/// One process group in a rank's dump, and its collectives: seqs `first_seq`..`last_enqueued`
/// are in the entries (PyTorch keeps the last ones), those up to `last_completed` completed, up
/// to `last_started` started, the others scheduled.
struct DumpGroup {
  std::string name = "0";  ///< pg_config's key, process_group[0]
  std::string desc = "default_pg";
  std::string ranks = "[0]";  ///< pg_config's "ranks", as PyTorch writes it
  int pg_id = 0;
  int64_t first_seq = 1;
  int64_t last_enqueued = 0;
  int64_t last_completed = 0;
  int64_t last_started = -1;           ///< -1: PyTorch's "none" (start times not recorded)
  std::string op = "all_reduce";       ///< every collective's, unless in `ops`
  std::map<int64_t, std::string> ops;  ///< seq to op, where it differs
  std::vector<std::vector<int64_t>> sizes = {{1048576}};  ///< every collective's input sizes
  std::map<int64_t, std::vector<std::vector<int64_t>>> sizes_at;  ///< seq to sizes, where differ
  std::string dtype = "Float";
};

/// One rank's dump.
struct RankDumpSpec {
  std::string version = "2.10";
  std::string comm_lib_version = "2.28.9";
  std::vector<DumpGroup> groups;
};

/// The dump's bytes.
std::string write_flight_recorder_dump(const RankDumpSpec& spec);

}  // namespace cohort::test
