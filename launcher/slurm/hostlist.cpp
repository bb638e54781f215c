#include "launcher/slurm/hostlist.hpp"

#include <map>

#include "common/text.hpp"

namespace cohort {
namespace {

constexpr int kMaxGroupsPerName = 8;
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

// "01-04,07" -> {"01","02","03","04","07"}.
std::optional<std::vector<std::string>> expand_ranges(const std::string& text, size_t limit) {
  auto ranges = parse_ranges(text);
  if (!ranges) return std::nullopt;
  std::vector<std::string> values;
  for (const Range& range : *ranges) {
    if (static_cast<uint64_t>(range.high - range.low) >= limit - values.size()) return std::nullopt;
    // Counted from the low end, so that a range ending at the largest number still ends.
    for (int64_t offset = 0; offset <= range.high - range.low; ++offset) {
      values.push_back(padded(range.low + offset, range.width));
    }
  }
  return values;
}

// A name's bracket groups expand as a product, each group by recursion: `groups_left` bounds
// both (Slurm's own names have at most a few). The names' characters are bounded too, so a long
// literal part times a wide range cannot take the machine's memory.
std::optional<std::vector<std::string>> expand_item(const std::string& item, size_t limit,
                                                    int groups_left = kMaxGroupsPerName) {
  size_t open = item.find('[');
  if (open == std::string::npos) return std::vector<std::string>{item};
  if (groups_left == 0) return std::nullopt;
  size_t close = item.find(']', open);
  auto values = expand_ranges(item.substr(open + 1, close - open - 1), limit);
  if (!values) return std::nullopt;
  auto rests = expand_item(item.substr(close + 1), limit, groups_left - 1);
  if (!rests) return std::nullopt;
  std::vector<std::string> names;
  size_t bytes = 0;
  for (const auto& value : *values) {
    for (const auto& rest : *rests) {
      names.push_back(item.substr(0, open) + value + rest);
      bytes += names.back().size();
      if (names.size() > limit || bytes > kMaxExpandedBytes) return std::nullopt;
    }
  }
  return names;
}

// The first name of one item, every group of it checked as expand_item would, none expanded.
std::optional<std::string> first_name(const std::string& item,
                                      int groups_left = kMaxGroupsPerName) {
  size_t open = item.find('[');
  if (open == std::string::npos) return item;
  if (groups_left == 0) return std::nullopt;
  size_t close = item.find(']', open);
  auto ranges = parse_ranges(item.substr(open + 1, close - open - 1));
  if (!ranges) return std::nullopt;
  auto rest = first_name(item.substr(close + 1), groups_left - 1);
  if (!rest) return std::nullopt;
  return item.substr(0, open) + padded(ranges->front().low, ranges->front().width) + *rest;
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
  std::vector<std::string> hosts;
  size_t bytes = 0;
  auto items = top_level_items(expression);
  if (!items) return std::nullopt;
  for (const auto& item : *items) {
    std::string trimmed(trim(item));
    if (trimmed.empty()) continue;
    auto names = expand_item(trimmed, limit);
    if (!names || hosts.size() + names->size() > limit) return std::nullopt;
    for (const auto& name : *names) bytes += name.size();
    if (bytes > kMaxExpandedBytes) return std::nullopt;
    hosts.insert(hosts.end(), names->begin(), names->end());
  }
  return hosts;
}

std::optional<std::string> first_host(const std::string& expression) {
  auto items = top_level_items(expression);
  if (!items) return std::nullopt;
  std::optional<std::string> first;
  for (const auto& item : *items) {
    std::string trimmed(trim(item));
    if (trimmed.empty()) continue;
    auto name = first_name(trimmed);
    if (!name) return std::nullopt;
    if (!first) first = std::move(name);
  }
  return first;
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
