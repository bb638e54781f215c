#include "launcher/launch/hostfile.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "common/host_port.hpp"
#include "common/text.hpp"

namespace cohort {
namespace {

constexpr int kMaxSlots = 4096;
constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";  // an editor's, on Windows

// A host as ssh takes it: a host name or an address literal (common/host_port), perhaps with one
// "user@" in front; so never a leading '-' (ssh would read it as an option).
bool valid_host_name(std::string_view name) {
  size_t at = name.find('@');
  if (at != std::string_view::npos) {
    std::string_view user = name.substr(0, at);
    if (user.empty() || user.front() == '-' ||
        !std::all_of(user.begin(), user.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '.' || c == '-' || c == '_';
        })) {
      return false;
    }
    name.remove_prefix(at + 1);
  }
  std::string host(name);
  return is_host_name(host) || is_ip_address(host);
}

std::optional<int> parse_slots(std::string_view text) {
  auto value = parse_int(text);
  if (!value || *value < 1 || *value > kMaxSlots) return std::nullopt;
  return static_cast<int>(*value);
}

// "node1:4" -> "node1" and "4"; a name without a colon, or an IPv6 address (several), has none.
// An address in brackets may have slots: "[fe80::1]:4", "user@[fe80::1]" (the brackets dropped).
std::pair<std::string, std::optional<std::string>> name_and_slots(const std::string& entry) {
  size_t open = entry.find('[');
  if (open != std::string::npos && (open == 0 || entry[open - 1] == '@')) {
    size_t close = entry.find(']', open);
    if (close == std::string::npos) return {entry, std::nullopt};  // not a host name
    std::string name = entry.substr(0, open) + entry.substr(open + 1, close - open - 1);
    std::string rest = entry.substr(close + 1);
    if (rest.empty()) return {name, std::nullopt};
    if (rest[0] != ':') return {entry, std::nullopt};
    return {name, rest.substr(1)};
  }
  size_t colon = entry.rfind(':');
  if (colon == std::string::npos || entry.find(':') != colon) return {entry, std::nullopt};
  return {entry.substr(0, colon), entry.substr(colon + 1)};
}

// Adds `host` unless it is already there; returns false on a duplicate.
bool add_host(HostSelection& selection, std::map<std::string, size_t>& seen, HostSlots host) {
  if (!seen.emplace(host.address(), selection.hosts.size()).second) return false;
  selection.hosts.push_back(std::move(host));
  return true;
}

// One hostfile line's fields after the host name: "slots=4", "max_slots=8". As in Open MPI, a
// line with max_slots alone has that many slots, and slots above max_slots are refused.
void parse_fields(const std::vector<std::string>& fields, HostSlots& host, const std::string& where,
                  std::vector<std::string>& problems) {
  std::optional<int> max_slots;
  for (size_t i = 1; i < fields.size(); ++i) {
    const std::string& field = fields[i];
    size_t equals = field.find('=');
    std::string key = field.substr(0, equals);
    std::string value = equals == std::string::npos ? "" : field.substr(equals + 1);
    bool is_max = key == "max_slots" || key == "max-slots";
    if (key != "slots" && !is_max) {
      problems.push_back(cat(where, ": unknown field '", field, "' (expected slots=N)"));
    } else if (key == "slots" ? host.slots_given : max_slots.has_value()) {
      problems.push_back(cat(where, ": ", key, " given twice"));
    } else if (auto slots = parse_slots(value); !slots) {
      problems.push_back(cat(where, ": ", key, " must be 1-", kMaxSlots, ", got '", value, "'"));
    } else if (is_max) {
      max_slots = *slots;
    } else {
      host.slots = *slots;
      host.slots_given = true;
    }
  }
  if (!max_slots) return;
  if (!host.slots_given) {
    host.slots = *max_slots;
    host.slots_given = true;
  } else if (host.slots > *max_slots) {
    problems.push_back(cat(where, ": slots=", host.slots, " is more than max_slots=", *max_slots));
  }
}

// A hostfile line as Open MPI's reader takes it: "slots = 4" is "slots=4".
std::string without_spaces_around_equals(std::string_view line) {
  std::string joined;
  for (size_t i = 0; i < line.size(); ++i) {
    size_t next = line.find_first_not_of(" \t", i);
    bool before_equals = next != std::string_view::npos && line[next] == '=';
    bool after_equals = !joined.empty() && joined.back() == '=';
    if (next != i && (before_equals || after_equals)) continue;  // a space beside an '='
    joined += line[i];
  }
  return joined;
}

struct HostFilter {
  std::string host;
  std::vector<int> slots;  ///< empty: the whole host
};

// "node1:0,2@node2" -> {node1 {0,2}}, {node2 {}}.
std::vector<HostFilter> parse_filter(const std::string& flag, const std::string& text,
                                     std::vector<std::string>& problems) {
  std::vector<HostFilter> filters;
  for (const std::string& item : split(text, '@')) {
    auto [host, slots] = name_and_slots(std::string(trim(item)));  // "[fe80::1]:0" too
    HostFilter filter{host, {}};
    if (filter.host.empty()) {
      problems.push_back(cat(flag, ": expected host[:slot,slot]@host..., got '", text, "'"));
      return {};
    }
    if (slots) {
      for (const std::string& slot : split(*slots, ',')) {
        auto number = parse_int(trim(slot));
        if (!number || *number < 0 || *number >= kMaxSlots) {
          problems.push_back(cat(flag, ": '", slot, "' is not a slot number in '", item, "'"));
          return {};
        }
        filter.slots.push_back(static_cast<int>(*number));
      }
    }
    filters.push_back(std::move(filter));
  }
  return filters;
}

std::vector<int> all_slots(const HostSlots& host) {
  if (!host.kept.empty()) return host.kept;
  std::vector<int> slots(host.slots);
  for (int i = 0; i < host.slots; ++i) slots[i] = i;
  return slots;
}

// Checks that every filter names a listed host and slots it has; returns filters by host.
std::map<std::string, std::vector<int>> check_filters(const std::string& flag,
                                                      const std::vector<HostFilter>& filters,
                                                      const HostSelection& selection,
                                                      std::vector<std::string>& problems) {
  std::map<std::string, std::vector<int>> by_host;
  for (const HostFilter& filter : filters) {
    auto host = std::find_if(selection.hosts.begin(), selection.hosts.end(),
                             [&](const HostSlots& h) { return h.address() == filter.host; });
    if (host == selection.hosts.end()) {
      bool user = std::any_of(selection.hosts.begin(), selection.hosts.end(), [&](auto& h) {
        return h.name.rfind(filter.host + "@", 0) == 0;  // "alice@a:1" split at its '@'
      });
      problems.push_back(cat(flag, ": '", filter.host, "' is not one of the hosts",
                             user ? " (name hosts without their user@)" : ""));
      continue;
    }
    for (int slot : filter.slots) {
      if (slot >= host->slots) {
        problems.push_back(
            cat(flag, ": ", filter.host, " has slots 0-", host->slots - 1, ", not ", slot));
      }
    }
    // DeepSpeed reads "a:0@a:1" one way for --include and another for --exclude: a host is named
    // once, with all its slots, or the user's slot would be dropped without a word.
    if (!by_host.emplace(filter.host, filter.slots).second) {
      problems.push_back(cat(flag, ": ", filter.host,
                             " is named twice: name it once, with all its slots (", filter.host,
                             ":0,1)"));
    }
  }
  return by_host;
}

}  // namespace

HostSelection parse_hostfile(const std::string& text, const std::string& origin) {
  HostSelection selection;
  std::map<std::string, size_t> seen;
  std::map<std::string, int> first_line;
  int line_number = 0;
  std::string_view body = text;
  if (body.rfind(kUtf8ByteOrderMark, 0) == 0) body.remove_prefix(kUtf8ByteOrderMark.size());
  for (const std::string& raw : split(body, '\n')) {
    ++line_number;
    std::string_view line = raw;
    line = line.substr(0, line.find('#'));
    std::vector<std::string> fields = split_words(without_spaces_around_equals(line));
    if (fields.empty()) continue;
    std::string where = cat(origin, ":", line_number);
    auto [name, slots] = name_and_slots(fields[0]);  // MPICH's "node1:4"
    if (!valid_host_name(name)) {
      selection.problems.push_back(cat(where, ": '", name, "' is not a host name"));
      continue;
    }
    HostSlots host{name};
    if (slots) fields.insert(fields.begin() + 1, "slots=" + *slots);
    parse_fields(fields, host, where, selection.problems);
    std::string key = host.address();
    if (!add_host(selection, seen, host)) {
      selection.problems.push_back(
          cat(where, ": host '", key, "' is already listed on line ", first_line[key]));
      continue;
    }
    first_line[key] = line_number;
  }
  if (selection.hosts.empty() && selection.problems.empty())
    selection.problems.push_back(cat(origin, ": no hosts in the hostfile"));
  return selection;
}

HostSelection parse_host_list(const std::string& text) {
  HostSelection selection;
  std::map<std::string, size_t> seen;
  for (const std::string& item : split(text, ',')) {
    std::string entry(trim(item));
    auto [name, slot_text] = name_and_slots(entry);
    HostSlots host{name};
    if (slot_text) {
      auto slots = parse_slots(*slot_text);
      if (!slots) {
        selection.problems.push_back(cat("-H: slots must be 1-", kMaxSlots, " in '", entry, "'"));
        continue;
      }
      host.slots = *slots;
      host.slots_given = true;
    }
    if (!valid_host_name(host.name)) {
      bool path = host.name.find('/') != std::string::npos;
      selection.problems.push_back(cat("-H: '", host.name, "' is not a host name",
                                       path ? " (a hostfile is given with --hostfile)" : ""));
      continue;
    }
    if (auto first = seen.find(host.address()); first != seen.end()) {
      int slots = selection.hosts[first->second].slots + host.slots;
      selection.problems.push_back(cat("-H: host '", host.name,
                                       "' is listed twice (give its slots once: ", host.name, ":",
                                       slots, ")"));
      continue;
    }
    add_host(selection, seen, host);
  }
  return selection;
}

HostSelection counted_hosts(const std::vector<std::pair<std::string, int>>& hosts,
                            const std::string& origin, const std::string& slots_origin) {
  HostSelection selection;
  std::map<std::string, size_t> seen;
  for (const auto& [name, slots] : hosts) {
    if (!valid_host_name(name)) {
      selection.problems.push_back(cat(origin, ": '", name, "' is not a host name"));
    } else if (slots < 1 || slots > kMaxSlots) {
      selection.problems.push_back(cat(slots_origin.empty() ? origin : slots_origin, ": ", name,
                                       " has ", slots, " slots; 1-", kMaxSlots, " are allowed"));
    } else if (!add_host(selection, seen, HostSlots{name, slots, true})) {
      selection.problems.push_back(cat(origin, ": host '", name, "' is listed twice"));
    }
  }
  if (selection.hosts.empty() && selection.problems.empty())
    selection.problems.push_back(cat(origin, ": no hosts"));
  return selection;
}

void filter_hosts(HostSelection& selection, const std::string& include,
                  const std::string& exclude) {
  if (include.empty() && exclude.empty()) return;
  if (!include.empty() && !exclude.empty()) {
    selection.problems.push_back("--include, --exclude: give one of them, not both");
    return;
  }
  const std::string flag = include.empty() ? "--exclude" : "--include";
  size_t before = selection.problems.size();
  auto filters = parse_filter(flag, include.empty() ? exclude : include, selection.problems);
  auto by_host = check_filters(flag, filters, selection, selection.problems);
  if (selection.problems.size() != before) return;

  std::vector<HostSlots> kept_hosts;
  for (HostSlots& host : selection.hosts) {
    auto filter = by_host.find(host.address());
    bool named = filter != by_host.end();
    if (!include.empty() && !named) continue;                           // not included
    if (!exclude.empty() && named && filter->second.empty()) continue;  // excluded whole
    if (named && !filter->second.empty()) {
      std::set<int> listed(filter->second.begin(), filter->second.end());
      std::vector<int> slots;
      for (int slot : all_slots(host)) {
        if (listed.count(slot) == (include.empty() ? 0u : 1u)) slots.push_back(slot);
      }
      if (slots.empty()) {
        selection.problems.push_back(cat(flag, ": leaves ", host.name, " without slots"));
        continue;
      }
      host.kept = slots;
    }
    kept_hosts.push_back(host);
  }
  if (kept_hosts.empty()) selection.problems.push_back(cat(flag, ": leaves no host"));
  selection.hosts = std::move(kept_hosts);
}

bool is_loopback_host(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

bool names_this_machine(const std::string& address) {
  return address == "localhost" || address == "127.0.0.1" || address == "::1";
}

std::string visible_devices(const HostSlots& host) {
  std::string devices;
  for (int slot : host.kept) devices += (devices.empty() ? "" : ",") + std::to_string(slot);
  return devices;
}

}  // namespace cohort
