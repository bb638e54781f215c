#include "launcher/options/fallback_list.hpp"

#include "common/text.hpp"

namespace cohort {

std::optional<std::vector<HostPort>> parse_fallback_list(const std::string& list,
                                                         uint16_t default_port,
                                                         std::string& problem) {
  std::vector<HostPort> endpoints;
  for (const std::string& item : split(list, ',')) {
    auto endpoint = parse_host_port(item, default_port);
    if (!endpoint || endpoint->port == 0) {
      problem = cat("--rdzv-fallback: expected host[:port],... (port 1-65535), got '", item,
                    "' in '", list, "'");
      return std::nullopt;
    }
    endpoints.push_back(*endpoint);
  }
  if (endpoints.size() > kMaxFallbacks) {
    problem = cat("--rdzv-fallback: at most ", kMaxFallbacks, " endpoints, got ", endpoints.size());
    return std::nullopt;
  }
  return endpoints;
}

}  // namespace cohort
