#include "launcher/launch/allocation.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

#include "common/text.hpp"
#include "launcher/slurm/hostlist.hpp"

namespace cohort {
namespace {

using Counted = std::vector<std::pair<std::string, int>>;

// cohort launch starts an ssh per host from this machine: far fewer than this in practice.
constexpr size_t kMaxHosts = 16384;
constexpr size_t kShownBytes = 200;  // of a variable's value, in a message

const std::string* find(const EnvVars& env, const std::string& name) {
  auto found = env.find(name);
  return found == env.end() || found->second.empty() ? nullptr : &found->second;
}

// Names listed once per slot ("n1 n1 n2 n2"), counted in order of first appearance.
Counted count_names(const std::vector<std::string>& names) {
  Counted counted;
  std::map<std::string, size_t> index;
  for (const std::string& name : names) {
    auto [at, added] = index.emplace(name, counted.size());
    if (added) counted.emplace_back(name, 0);
    ++counted[at->second].second;
  }
  return counted;
}

// A node file: one host per line, a line per slot (the first word of each line).
Counted count_node_file(const std::string& text) {
  std::vector<std::string> names;
  for (const std::string& line : split(text, '\n')) {
    std::vector<std::string> fields = split_words(line);
    if (!fields.empty()) names.push_back(fields[0]);
  }
  return count_names(names);
}

// SLURM_TASKS_PER_NODE, "2(x3),1": the tasks of each of `hosts` hosts; nullopt when malformed or
// when it does not count exactly that many hosts.
std::optional<std::vector<int>> slurm_tasks(const std::string& text, size_t hosts) {
  std::vector<int> tasks;
  for (const std::string& item : split(text, ',')) {
    size_t paren = item.find('(');
    auto count = parse_int(item.substr(0, paren));
    std::optional<int64_t> repeat = 1;
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')')
        return std::nullopt;
      repeat = parse_int(item.substr(paren + 2, item.size() - paren - 3));
    }
    if (!count || !repeat || *count < 1 || *count > INT32_MAX || *repeat < 1 ||
        static_cast<uint64_t>(*repeat) > hosts - std::min(hosts, tasks.size())) {
      return std::nullopt;
    }
    tasks.insert(tasks.end(), static_cast<size_t>(*repeat), static_cast<int>(*count));
  }
  if (tasks.size() != hosts) return std::nullopt;
  return tasks;
}

Allocation slurm_allocation(const std::string& variable, const std::string& nodes,
                            const EnvVars& env) {
  Allocation allocation{
      "Slurm",
      cat("the Slurm allocation (", variable, "=", cut_middle(nodes, kShownBytes), ")"),
      {}};
  auto names = expand_hostlist(nodes, kMaxHosts);
  if (!names || names->empty()) {
    allocation.selection.problems.push_back(cat(variable, ": '", cut_middle(nodes, kShownBytes),
                                                "' is not a Slurm host list of at most ", kMaxHosts,
                                                " hosts"));
    return allocation;
  }
  std::vector<int> tasks(names->size(), 1);
  const std::string* text = find(env, "SLURM_TASKS_PER_NODE");
  if (text) {
    auto counted = slurm_tasks(*text, names->size());
    if (!counted) {
      allocation.selection.problems.push_back(
          cat("SLURM_TASKS_PER_NODE: '", cut_middle(*text, kShownBytes),
              "' does not give the tasks of the ", names->size(), " hosts of ", variable));
      return allocation;
    }
    tasks = *counted;
  }
  Counted counted;
  for (size_t i = 0; i < names->size(); ++i) counted.emplace_back((*names)[i], tasks[i]);
  allocation.selection = counted_hosts(counted, variable, text ? "SLURM_TASKS_PER_NODE" : "");
  return allocation;
}

Allocation node_file_allocation(const std::string& scheduler, const std::string& variable,
                                const std::string& path, const FileReader& read_file) {
  Allocation allocation{
      scheduler, cat("the ", scheduler, " allocation (", variable, "=", path, ")"), {}};
  auto text = read_file(path);
  if (!text) {
    allocation.selection.problems.push_back(cat(variable, ": cannot read '", path, "'"));
    return allocation;
  }
  allocation.selection = counted_hosts(count_node_file(*text), cat(variable, " ", path));
  return allocation;
}

// LSB_MCPU_HOSTS, "hostA 4 hostB 2".
Allocation lsf_pairs_allocation(const std::string& text) {
  Allocation allocation{"LSF", "the LSF allocation (LSB_MCPU_HOSTS)", {}};
  std::vector<std::string> fields = split_words(text);
  Counted counted;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    auto slots = parse_int(fields[i + 1]);
    if (!slots || *slots < 1 || *slots > INT32_MAX) {
      allocation.selection.problems.push_back(
          cat("LSB_MCPU_HOSTS: '", cut_middle(fields[i + 1], kShownBytes),
              "' is not a slot count (expected 'host slots host slots ...')"));
      return allocation;
    }
    auto [at, added] = index.emplace(fields[i], counted.size());
    if (added) counted.emplace_back(fields[i], 0);
    counted[at->second].second = static_cast<int>(
        std::min<int64_t>(INT32_MAX, int64_t{counted[at->second].second} + *slots));
  }
  if (fields.size() % 2 != 0) {
    allocation.selection.problems.push_back(
        "LSB_MCPU_HOSTS: expected 'host slots host slots ...', got an odd number of words");
    return allocation;
  }
  allocation.selection = counted_hosts(counted, "LSB_MCPU_HOSTS");
  return allocation;
}

}  // namespace

std::optional<Allocation> find_allocation(const EnvVars& env, const FileReader& read_file) {
  for (const char* variable : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (const std::string* nodes = find(env, variable))
      return slurm_allocation(variable, *nodes, env);
  }
  if (const std::string* path = find(env, "PBS_NODEFILE"))
    return node_file_allocation("PBS", "PBS_NODEFILE", *path, read_file);
  if (const std::string* pairs = find(env, "LSB_MCPU_HOSTS")) return lsf_pairs_allocation(*pairs);
  if (const std::string* path = find(env, "LSB_DJOB_HOSTFILE"))
    return node_file_allocation("LSF", "LSB_DJOB_HOSTFILE", *path, read_file);
  if (const std::string* names = find(env, "LSB_HOSTS")) {
    Allocation allocation{"LSF", "the LSF allocation (LSB_HOSTS)", {}};
    allocation.selection = counted_hosts(count_names(split_words(*names)), "LSB_HOSTS");
    return allocation;
  }
  return std::nullopt;
}

}  // namespace cohort
