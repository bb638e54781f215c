// libFuzzer target: Slurm hostlist expressions (SLURM_JOB_NODELIST and the like). The first byte
// picks the mode. Expanding arbitrary bytes must end quickly with at most `limit` names or a
// refusal, whatever the ranges, products and nesting; what it expands begins with first_host's
// name. Compressing host names made of the bytes (host-name characters only) and expanding the
// result must give back the same names, counted with their repeats (compress_hostlist groups
// them, so the order may change).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "launcher/slurm/hostlist.hpp"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

constexpr size_t kLimit = 4096;

void expand_anything(const std::string& expression) {
  auto hosts = cohort::expand_hostlist(expression, kLimit);
  if (!hosts) return;
  require(hosts->size() <= kLimit);
  auto first = cohort::first_host(expression);
  require(hosts->empty() ? !first : first && *first == hosts->front());
}

// Splits `text` at ',' into names of [a-z0-9.-] (other bytes dropped), at most 64 of them.
std::vector<std::string> host_names(const std::string& text) {
  std::vector<std::string> names(1);
  for (char c : text) {
    if (c == ',') {
      if (names.size() == 64) break;
      names.emplace_back();
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-') {
      names.back() += c;
    }
  }
  names.erase(std::remove(names.begin(), names.end(), std::string()), names.end());
  return names;
}

void round_trip(const std::string& text) {
  std::vector<std::string> names = host_names(text);
  std::string compressed = cohort::compress_hostlist(names);
  auto expanded = cohort::expand_hostlist(compressed, kLimit);
  require(expanded.has_value());
  std::sort(names.begin(), names.end());
  std::sort(expanded->begin(), expanded->end());
  require(*expanded == names);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    round_trip(text);
  } else {
    expand_anything(text);
  }
  return 0;
}
