#include "launcher/options/flag_abbreviations.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string_view>

#include "launcher/options/foreign_flags.hpp"

namespace cohort {
namespace {

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// mpirun's and mpiexec's long flags written with one dash ("-np 8", "-hostfile hf").
const std::vector<std::string> kSingleDashFlags = {
    "-np", "-ppn", "-npernode", "-host", "-hosts", "-hostfile", "-machinefile", "-report-bindings"};

// torchrun's flags (2.x up to current main), each between spaces: a command torchrun accepts
// means the same to cohort, whatever flags cohort adds.
constexpr std::string_view kTorchrunFlags =
    " nnodes nproc-per-node rdzv-backend rdzv-endpoint rdzv-id rdzv-conf standalone"
    " max-restarts monitor-interval start-method event-log-handler role module no-python"
    " run-path log-dir redirects tee local-ranks-filter duplicate-stdout-filters"
    " duplicate-stderr-filters node-rank master-addr master-port local-addr logs-specs"
    " numa-binding signals-to-handle shutdown-timeout virtual-local-rank"
    " log-line-prefix-template help ";

// torchrun 1.13's: a prefix that names several flags of today's torchrun may name one of these,
// and a command line written for 1.13 (--log DIR: --log_dir) must still mean the same.
constexpr std::string_view kTorchrun113Flags =
    " nnodes nproc-per-node rdzv-backend rdzv-endpoint rdzv-id rdzv-conf standalone"
    " max-restarts monitor-interval start-method role module no-python run-path log-dir"
    " redirects tee node-rank master-addr master-port help ";

bool is_listed(std::string_view list, const std::string& dashed) {
  return list.find(" " + dashed.substr(2) + " ") != std::string_view::npos;
}

bool is_torchrun_flag(const std::string& dashed) { return is_listed(kTorchrunFlags, dashed); }

// "-np" (or "-np=8") as "--np" when the command has a flag of that long name; else `word`
// unchanged.
std::string with_two_dashes(const std::string& word, const std::vector<FlagSpec>& flags) {
  std::string name = word.substr(0, word.find('='));
  if (!has(kSingleDashFlags, name)) return word;
  for (const FlagSpec& flag : flags) {
    if (has(flag.long_names, "-" + name)) return "-" + word;
  }
  return word;
}

// The flags one of whose long names starts with `prefix`, each once.
std::vector<const FlagSpec*> candidates(const std::string& prefix,
                                        const std::vector<FlagSpec>& flags) {
  std::vector<const FlagSpec*> found;
  for (const FlagSpec& flag : flags) {
    if (flag.hidden) continue;  // not torchrun's, nor listed: no prefix of it is ambiguous
    for (const std::string& name : flag.long_names) {
      if (name.rfind(prefix, 0) == 0) {
        found.push_back(&flag);
        break;
      }
    }
  }
  return found;
}

// Of several candidates, torchrun's flag when it is the only one of torchrun's (argparse, which
// knows no others, would take it), else torchrun 1.13's when it is the only one of those; else
// all of them, an ambiguity.
std::vector<const FlagSpec*> torchrun_first(std::vector<const FlagSpec*> found) {
  for (bool FlagSpec::*of : {&FlagSpec::torchrun, &FlagSpec::torchrun_113}) {
    auto is_of = [of](const FlagSpec* flag) { return flag->*of; };
    if (std::count_if(found.begin(), found.end(), is_of) == 1)
      return {*std::find_if(found.begin(), found.end(), is_of)};
  }
  return found;
}

// The long name of `flag` that `prefix` abbreviates (the spelling the user chose).
std::string completed(const std::string& prefix, const FlagSpec& flag) {
  if (has(flag.long_names, prefix)) return prefix;
  for (const std::string& name : flag.long_names) {
    if (name.rfind(prefix, 0) == 0) return name;
  }
  return prefix;
}

std::string ambiguity(const std::string& prefix, const std::vector<const FlagSpec*>& found) {
  std::string text = "ambiguous option: " + prefix + " could match";
  for (size_t i = 0; i < found.size(); ++i) {
    text += (i == 0 ? " " : ", ") + found[i]->long_names.front();
  }
  return text;
}

// A long flag word: rewritten in full when it abbreviates one flag. Sets `takes_value` when the
// next word is its value, `empty_value` when it is "--name=" (its value the empty string).
std::string expand_long(const std::string& word, const std::vector<FlagSpec>& flags,
                        bool& takes_value, bool& empty_value, std::string& error) {
  size_t equals = word.find('=');
  std::string name = word.substr(0, equals);
  std::vector<const FlagSpec*> found;
  for (const FlagSpec& flag : flags) {
    if (has(flag.long_names, name)) found = {&flag};
  }
  if (found.empty()) found = torchrun_first(candidates(name, flags));
  if (found.size() > 1) error = ambiguity(name, found);
  if (found.size() != 1) return word;
  takes_value = found.front()->takes_value && equals == std::string::npos;
  empty_value = found.front()->takes_value && equals == word.size() - 1;
  if (empty_value) return completed(name, *found.front());
  return completed(name, *found.front()) + (equals == std::string::npos ? "" : word.substr(equals));
}

const FlagSpec* short_flag(const std::string& word, const std::vector<FlagSpec>& flags) {
  for (const FlagSpec& flag : flags) {
    if (has(flag.short_names, word.substr(0, 2))) return &flag;
  }
  return nullptr;
}

// A short flag word ("-r", "-r3", "-vv"): whether the next word is its value.
bool short_takes_next(const std::string& word, const std::vector<FlagSpec>& flags) {
  const FlagSpec* flag = short_flag(word, flags);
  return flag && flag->takes_value && word.size() == 2;
}

// A cluster of short flags that take no value ("-vv"): every letter must be one. Otherwise a
// one-dash long flag of another tool ("-hostfle", "-report-bindings") would read as -h (help,
// exit 0) or -r with a strange value.
std::string cluster_problem(const std::string& word, const std::vector<FlagSpec>& flags) {
  const FlagSpec* first = short_flag(word, flags);
  if (word.size() <= 2 || !first || first->takes_value) return {};
  for (size_t i = 2; i < word.size(); ++i) {
    const FlagSpec* flag = short_flag(std::string("-") + word[i], flags);
    if (!flag || flag->takes_value) {
      return "unknown flag '" + word + "' (a long flag takes two dashes)";
    }
  }
  return {};
}

// "-r=3" as argparse reads it: "-r3" for a short flag that takes a value; else `word` unchanged.
std::string without_short_equals(const std::string& word, const std::vector<FlagSpec>& flags) {
  if (word.size() < 4 || word[2] != '=') return word;
  const FlagSpec* flag = short_flag(word, flags);
  return flag && flag->takes_value ? word.substr(0, 2) + word.substr(3) : word;
}

}  // namespace

ExpandedWords expand_abbreviations(const std::vector<std::string>& words,
                                   const std::vector<FlagSpec>& flags) {
  ExpandedWords result{words, {}};
  for (size_t i = 0; i < result.words.size(); ++i) {
    std::string& word = result.words[i];
    if (word == "--" || word.size() < 2 || word[0] != '-') break;
    bool takes_value = false, empty_value = false;
    word = with_two_dashes(word, flags);
    if (std::string hint = foreign_flag_hint(word.substr(0, word.find('='))); !hint.empty()) {
      result.error = "unknown flag '" + word + "' (" + hint + ")";  // "-mca" is no cluster
      return result;
    }
    if (word.rfind("--", 0) == 0) {
      word = expand_long(word, flags, takes_value, empty_value, result.error);
      if (!result.error.empty()) return result;
      // CLI11 would take the next word as the value of "--name=", argparse takes "".
      if (empty_value) result.words.insert(result.words.begin() + static_cast<long>(++i), "");
    } else {
      result.error = cluster_problem(word, flags);
      if (!result.error.empty()) return result;
      word = without_short_equals(word, flags);
      takes_value = short_takes_next(word, flags);
    }
    if (takes_value) ++i;
  }
  return result;
}

std::vector<FlagSpec> flag_specs(const CLI::App& command) {
  std::vector<FlagSpec> flags;
  for (const CLI::Option* option : command.get_options()) {
    FlagSpec flag;
    for (const std::string& name : option->get_lnames()) flag.long_names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) flag.short_names.push_back("-" + name);
    flag.takes_value = option->get_expected_min() > 0;
    flag.hidden = option->get_group().empty();
    flag.torchrun = !flag.long_names.empty() && is_torchrun_flag(flag.long_names.front());
    flag.torchrun_113 =
        !flag.long_names.empty() && is_listed(kTorchrun113Flags, flag.long_names.front());
    if (!flag.long_names.empty() || !flag.short_names.empty()) flags.push_back(std::move(flag));
  }
  return flags;
}

}  // namespace cohort
