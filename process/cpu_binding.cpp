#include "process/cpu_binding.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace cohort {
namespace {

constexpr int kMpolPreferred = 1;      // linux/mempolicy.h
constexpr int kMpolPreferredMany = 5;  // Linux 5.15
// The most ids a CPU list may name in all: far more than any kernel's CPUs (NR_CPUS is at most
// 8192), and few enough that any list parse_cpu_list takes prints as one it takes back.
constexpr size_t kMaxCpuIds = 65536;

std::optional<int> parse_id(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

std::string cpu_list_text(const std::vector<int>& sorted_ids) {
  std::string text;
  for (size_t i = 0; i < sorted_ids.size();) {
    size_t last = i;
    while (last + 1 < sorted_ids.size() && sorted_ids[last + 1] == sorted_ids[last] + 1) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(sorted_ids[i]);
    if (last > i) text += '-' + std::to_string(sorted_ids[last]);
    i = last + 1;
  }
  return text;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> ids;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    size_t dash = item.find('-');
    auto first = parse_id(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : parse_id(item.substr(dash + 1));
    if (!first || !last || *last < *first) return std::nullopt;
    if (ids.size() + static_cast<size_t>(*last - *first) + 1 > kMaxCpuIds) return std::nullopt;
    for (int offset = 0; offset <= *last - *first; ++offset) ids.push_back(*first + offset);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

PreparedBinding prepare_binding(const CpuBinding& binding) {
  PreparedBinding prepared;
  if (!binding.bound() || !binding.apply) return prepared;
  prepared.set_affinity = true;
  CPU_ZERO(&prepared.cpus);
  for (int cpu : binding.cpus) {
    if (cpu < CPU_SETSIZE) CPU_SET(cpu, &prepared.cpus);
  }
  if (!binding.memory_policy || binding.numa_nodes.empty()) return prepared;
  constexpr int kBitsPerWord = sizeof(unsigned long) * 8;
  for (int node : binding.numa_nodes) {
    if (node >= static_cast<int>(prepared.nodemask.size()) * kBitsPerWord) continue;
    prepared.nodemask[static_cast<size_t>(node / kBitsPerWord)] |= 1UL << (node % kBitsPerWord);
  }
  prepared.max_node = prepared.nodemask.size() * kBitsPerWord;
  prepared.mempolicy_mode = binding.numa_nodes.size() == 1 ? kMpolPreferred : kMpolPreferredMany;
  return prepared;
}

int apply_prepared_binding(const PreparedBinding& prepared) {
  if (!prepared.set_affinity) return 0;
  if (::sched_setaffinity(0, sizeof prepared.cpus, &prepared.cpus) != 0) return errno;
  if (prepared.mempolicy_mode >= 0) {
    // Best effort: a kernel without MPOL_PREFERRED_MANY (before 5.15) keeps the default policy.
    ::syscall(SYS_set_mempolicy, prepared.mempolicy_mode, prepared.nodemask.data(),
              prepared.max_node);
  }
  return 0;
}

}  // namespace cohort
