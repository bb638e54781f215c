#include "launcher/slurm/hostlist.hpp"

#include <map>

#include "common/text.hpp"

namespace cohort {
namespace {

constexpr size_t kMaxGroupsPerName = 8;
// The characters of all the names of one expansion (a real cluster's list is a few MiB at most).
constexpr size_t kMaxExpandedBytes = 64 << 20;

// `value` in decimal, zero-padded on the left to `width` digits.
std::string padded(int64_t value, size_t width) {
  std::string text = std::to_string(value);
  if (text.size() < width) text.insert(0, width - text.size(), '0');
  return text;
}

// Splits at commas outside brackets; nullopt if brackets do not balance.
std::optional<std::vector<std::string>> top_level_items(const std::string& expression) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : expression) {
    if (c == '[' && ++depth > 1) return std::nullopt;
    if (c == ']' && --depth < 0) return std::nullopt;
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
      continue;
    }
    current += c;
  }
  if (depth != 0) return std::nullopt;
  items.push_back(current);
  return items;
}

// A bracket group's numbers: "01-04,07" -> {1, 4, width 2}, {7, 7, width 2}.
struct Range {
  int64_t low = 0;
  int64_t high = 0;
  size_t width = 0;  ///< zero padding, from the low bound's digits
};

std::optional<std::vector<Range>> parse_ranges(const std::string& text) {
  std::vector<Range> ranges;
  for (const auto& part : split(text, ',')) {
    size_t dash = part.find('-');
    std::string low_text = part.substr(0, dash);
    std::string high_text = dash == std::string::npos ? low_text : part.substr(dash + 1);
    auto low = parse_int(low_text), high = parse_int(high_text);
    if (low_text.empty() || !low || !high || *low < 0 || *high < *low) return std::nullopt;
    ranges.push_back({*low, *high, low_text.size()});
  }
  return ranges;
}

// One name of a hostlist: literal text around at most kMaxGroupsPerName bracket groups (Slurm's
// own names have a few), "rack[1-2]-n[01-02]" -> literals {"rack", "-n", ""}, groups {1-2},
// {01-02}.
struct Pattern {
  std::vector<std::string> literals;  ///< one more than the groups
  std::vector<std::vector<Range>> groups;
};

std::optional<Pattern> parse_pattern(const std::string& item) {
  Pattern pattern;
  size_t start = 0;
  for (;;) {
    size_t open = item.find('[', start);
    pattern.literals.push_back(item.substr(start, open - start));
    if (open == std::string::npos) return pattern;
    size_t close = item.find(']', open);
    if (close == std::string::npos || pattern.groups.size() == kMaxGroupsPerName)
      return std::nullopt;
    auto ranges = parse_ranges(item.substr(open + 1, close - open - 1));
    if (!ranges) return std::nullopt;
    pattern.groups.push_back(std::move(*ranges));
    start = close + 1;
  }
}

// Every name of the expression, checked whole; nullopt when any part is malformed.
std::optional<std::vector<Pattern>> parse_hostlist(const std::string& expression) {
  auto items = top_level_items(expression);
  if (!items) return std::nullopt;
  std::vector<Pattern> patterns;
  for (const auto& item : *items) {
    std::string trimmed(trim(item));
    if (trimmed.empty()) continue;
    auto pattern = parse_pattern(trimmed);
    if (!pattern) return std::nullopt;
    patterns.push_back(std::move(*pattern));
  }
  return patterns;
}

// Appends the names of `pattern` to `hosts` (the groups as a product, the first one outermost);
// false past `limit` names or kMaxExpandedBytes of them in `hosts`, whose characters `bytes`
// counts. Each group's product is checked before it is made, and the names only grow, so
// neither bound is ever passed by much.
bool expand_pattern(const Pattern& pattern, size_t limit, std::vector<std::string>& hosts,
                    size_t& bytes) {
  std::vector<std::string> names{pattern.literals[0]};
  size_t names_bytes = names[0].size();
  for (size_t g = 0; g < pattern.groups.size(); ++g) {
    std::vector<std::string> longer;
    size_t longer_bytes = 0;
    for (const std::string& name : names) {
      for (const Range& range : pattern.groups[g]) {
        // Counted from the low end, so that a range ending at the largest number still ends.
        for (int64_t offset = 0; offset <= range.high - range.low; ++offset) {
          longer.push_back(name + padded(range.low + offset, range.width) +
                           pattern.literals[g + 1]);
          longer_bytes += longer.back().size();
          if (hosts.size() + longer.size() > limit || bytes + longer_bytes > kMaxExpandedBytes)
            return false;
        }
      }
    }
    names = std::move(longer);
    names_bytes = longer_bytes;
  }
  bytes += names_bytes;
  if (hosts.size() + names.size() > limit || bytes > kMaxExpandedBytes) return false;
  hosts.insert(hosts.end(), names.begin(), names.end());
  return true;
}

// Appends the first names of `pattern` to `hosts` until it holds `count`, in expand_pattern's
// order (the first group outermost), making no other name.
void leading_names(const Pattern& pattern, size_t count, std::vector<std::string>& hosts) {
  struct Position {
    size_t range = 0;
    int64_t offset = 0;
  };
  std::vector<Position> at(pattern.groups.size());
  while (hosts.size() < count) {
    std::string name = pattern.literals[0];
    for (size_t g = 0; g < at.size(); ++g) {
      const Range& range = pattern.groups[g][at[g].range];
      name += padded(range.low + at[g].offset, range.width) + pattern.literals[g + 1];
    }
    hosts.push_back(std::move(name));
    size_t g = at.size();  // the next name: the last group turns fastest
    for (; g > 0; --g) {
      Position& position = at[g - 1];
      const std::vector<Range>& ranges = pattern.groups[g - 1];
      if (position.offset < ranges[position.range].high - ranges[position.range].low) {
        ++position.offset;
        break;
      }
      position.offset = 0;
      if (++position.range < ranges.size()) break;
      position.range = 0;
    }
    if (g == 0) return;  // every name of the pattern made
  }
}

struct Numbered {
  std::string prefix;
  std::string digits;
  std::string suffix;
};

// Splits a name at its last run of digits: "gpu-07a" -> {"gpu-", "07", "a"}.
std::optional<Numbered> numbered(const std::string& host) {
  size_t end = host.find_last_of("0123456789");
  if (end == std::string::npos) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(host[begin - 1]))) --begin;
  return Numbered{host.substr(0, begin), host.substr(begin, end - begin + 1), host.substr(end + 1)};
}

}  // namespace

std::optional<std::vector<std::string>> expand_hostlist(const std::string& expression,
                                                        size_t limit) {
  auto patterns = parse_hostlist(expression);
  if (!patterns) return std::nullopt;
  std::vector<std::string> hosts;
  size_t bytes = 0;
  for (const Pattern& pattern : *patterns) {
    if (!expand_pattern(pattern, limit, hosts, bytes)) return std::nullopt;
  }
  return hosts;
}

std::optional<std::string> first_host(const std::string& expression) {
  auto hosts = first_hosts(expression, 1);
  if (!hosts || hosts->empty()) return std::nullopt;
  return hosts->front();
}

std::optional<std::vector<std::string>> first_hosts(const std::string& expression, size_t count) {
  auto patterns = parse_hostlist(expression);
  if (!patterns) return std::nullopt;
  std::vector<std::string> hosts;
  for (const Pattern& pattern : *patterns) {
    if (hosts.size() >= count) break;
    leading_names(pattern, count, hosts);
  }
  return hosts;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  // Group by (prefix, suffix, width) in order of first appearance; numbers become ranges.
  struct Group {
    std::string prefix, suffix;
    size_t width;
    std::vector<int64_t> numbers;
  };
  std::vector<Group> groups;
  std::vector<std::string> out;
  std::map<std::string, size_t> index;
  for (const auto& host : hosts) {
    auto parts = numbered(host);
    if (!parts || parts->digits.size() > 18) {
      groups.push_back({host, "", 0, {}});
      continue;
    }
    // Zero-padded numbers keep their width; unpadded ones group together whatever their length.
    bool padded_number = parts->digits.size() > 1 && parts->digits[0] == '0';
    auto key_of = [&](size_t width) {
      return parts->prefix + "\x01" + parts->suffix + "\x01" + std::to_string(width);
    };
    size_t width = padded_number ? parts->digits.size() : 0;
    if (!padded_number && index.count(key_of(parts->digits.size()))) width = parts->digits.size();
    std::string key = key_of(width);
    auto found = index.find(key);
    if (found == index.end()) {
      index[key] = groups.size();
      groups.push_back({parts->prefix, parts->suffix, width, {}});
      found = index.find(key);
    }
    groups[found->second].numbers.push_back(*parse_int(parts->digits));
  }
  for (const auto& group : groups) {
    if (group.numbers.empty()) {
      out.push_back(group.prefix);
      continue;
    }
    if (group.numbers.size() == 1) {
      out.push_back(group.prefix + padded(group.numbers[0], group.width) + group.suffix);
      continue;
    }
    std::string ranges;
    for (size_t i = 0; i < group.numbers.size();) {
      size_t j = i;
      while (j + 1 < group.numbers.size() && group.numbers[j + 1] == group.numbers[j] + 1) ++j;
      if (!ranges.empty()) ranges += ",";
      ranges += padded(group.numbers[i], group.width);
      if (j > i) ranges += "-" + padded(group.numbers[j], group.width);
      i = j + 1;
    }
    out.push_back(group.prefix + "[" + ranges + "]" + group.suffix);
  }
  return join(out, ",");
}

}  // namespace cohort
