#include "agent/output_config.hpp"

#include <climits>

#include "common/text.hpp"

namespace cohort {

std::optional<StdSpec> StdSpec::parse(const std::string& text) {
  StdSpec spec;
  auto value_of = [](std::string_view part) -> std::optional<int> {
    auto value = parse_int(trim(part));
    if (!value || *value < 0 || *value > 3) return std::nullopt;
    return static_cast<int>(*value);
  };
  if (text.find(':') == std::string::npos) {
    auto value = value_of(text);
    if (!value) return std::nullopt;
    spec.all = *value;
    return spec;
  }
  for (const auto& item : split(text, ',')) {
    auto parts = split(item, ':');
    if (parts.size() != 2) return std::nullopt;
    auto rank = parse_int(trim(parts[0]));
    auto value = value_of(parts[1]);
    if (!rank || *rank < 0 || *rank > INT_MAX || !value) return std::nullopt;
    spec.per_rank[static_cast<int>(*rank)] = *value;
  }
  return spec;
}

int StdSpec::for_rank(int local_rank) const {
  auto found = per_rank.find(local_rank);
  return found == per_rank.end() ? (per_rank.empty() ? all : 0) : found->second;
}

StreamRoute route_stream(const OutputConfig& config, int local_rank, int stream) {
  bool redirected = (config.redirects.for_rank(local_rank) & stream) != 0;
  bool teed = (config.tee.for_rank(local_rank) & stream) != 0;
  bool shown = config.console_ranks.empty() || config.console_ranks.count(local_rank) > 0;
  return {redirected || teed, shown && (!redirected || teed)};
}

bool writes_worker_files(const OutputConfig& config, int nproc) {
  if (!config.stdout_filters.empty() || !config.stderr_filters.empty()) return true;
  for (int local_rank = 0; local_rank < nproc; ++local_rank) {
    if ((config.redirects.for_rank(local_rank) | config.tee.for_rank(local_rank)) != 0) return true;
  }
  return false;
}

std::string line_prefix(const std::string& prefix_template, const std::string& role, int local_rank,
                        int rank, const std::string& host_name) {
  std::string prefix = substitute(prefix_template, "role_name", role);
  prefix = substitute(prefix, "local_rank", std::to_string(local_rank));
  prefix = substitute(prefix, "hostname", host_name);
  return substitute(prefix, "rank", std::to_string(rank));
}

std::vector<std::string> parse_filter_list(const std::string& text) {
  std::vector<std::string> filters;
  std::string item;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == ',' && i + 1 < text.size() && text[i + 1] == ',') {
      item += ',';
      ++i;
    } else if (i == text.size() || text[i] == ',') {
      if (!item.empty()) filters.push_back(item);
      item.clear();
    } else {
      item += text[i];
    }
  }
  return filters;
}

}  // namespace cohort
