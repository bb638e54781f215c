// argparse's abbreviations, as torchrun accepts them: a long flag may be shortened to any prefix
// that names one flag (--max-r for --max-restarts, --master_p for --master_port); a prefix that
// names several is an error that lists them, unless only one of those is torchrun's own (--max is
// --max-restarts, as under torchrun, not cohort's --max-same-failures too), or else only one is
// torchrun 1.13's (--log is --log-dir, as under 1.13, though 2.x added --logs-specs). Rewrites a
// command's words before CLI11 parses them, up to the training script. Pure functions (one reads
// a CLI11 command's flags); main thread at start.
#pragma once

#include <string>
#include <vector>

#include "launcher/options/cli_fwd.hpp"

namespace cohort {

/// One flag of a command: its long names with "--" ("--nproc-per-node", "--nproc_per_node"),
/// its short names with "-", and whether it takes a value.
struct FlagSpec {
  std::vector<std::string> long_names;
  std::vector<std::string> short_names;
  bool takes_value = false;
  bool hidden = false;    ///< cohort's internal flags: only their full names count, no prefix
  bool torchrun = false;  ///< one of torchrun's flags: wins a prefix that names cohort's own too
  bool torchrun_113 = false;  ///< one of torchrun 1.13's: wins a prefix torchrun's still share
};

struct ExpandedWords {
  std::vector<std::string> words;
  std::string error;  ///< "ambiguous option: --ma could match --master-addr, --max-restarts"
};

/// `words` (what follows the command's name) with every abbreviated long flag written out in
/// full, and mpirun's one-dash long flags (-np, -ppn, -npernode, -host, -hosts, -hostfile,
/// -machinefile) with two where the command has them, up to the first word that is not a flag
/// or a flag's value (the script) or "--". A short flag with its value after "=" ("-r=3", as
/// argparse reads it) is written "-r3"; a long one with nothing after it ("--rdzv-id=", an
/// empty variable in a script) is written as two words, the flag and "", so that its value is
/// empty (argparse's reading), not the next word.
ExpandedWords expand_abbreviations(const std::vector<std::string>& words,
                                   const std::vector<FlagSpec>& flags);

/// The flags of a CLI11 command, torchrun's marked as such.
std::vector<FlagSpec> flag_specs(const CLI::App& command);

}  // namespace cohort
