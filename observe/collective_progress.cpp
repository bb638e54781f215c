#include "observe/collective_progress.hpp"

#include <algorithm>
#include <map>

#include "common/text.hpp"

namespace cohort::observe {

namespace {

std::string capped(std::string_view text) {
  return std::string(text.substr(0, kMaxCollectiveText));
}

std::optional<std::string> text_at(const PickleValue& dict, std::string_view key) {
  const PickleValue* value = dict.get(key);
  if (value == nullptr || value->as_string() == nullptr) return std::nullopt;
  return capped(*value->as_string());
}

std::optional<int64_t> int_at(const PickleValue& dict, std::string_view key) {
  const PickleValue* value = dict.get(key);
  if (value == nullptr || value->as_int() == nullptr) return std::nullopt;
  return *value->as_int();
}

// How many ranks "[0, 1, 2]" lists; nullopt when it is not such a list.
std::optional<int64_t> count_ranks(std::string_view text) {
  text = trim(text);
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::string_view inside = trim(text.substr(1, text.size() - 2));
  if (inside.empty()) return 0;
  int64_t count = 0;
  size_t start = 0;
  while (start <= inside.size()) {
    size_t comma = inside.find(',', start);
    std::string_view part = inside.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!parse_int(trim(part))) return std::nullopt;
    ++count;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return count;
}

CollectiveCall call_of(const PickleValue& entry, int64_t seq) {
  CollectiveCall call;
  call.seq = seq;
  if (const PickleValue* name = entry.get("profiling_name"); name && name->as_string()) {
    std::string_view op = *name->as_string();
    if (op.starts_with("nccl:")) op.remove_prefix(5);
    call.op = capped(op);
  }
  if (const PickleValue* sizes = entry.get("input_sizes"); sizes && sizes->as_list()) {
    for (const PickleValue& tensor : *sizes->as_list()) {
      if (call.input_sizes.size() == kMaxCollectiveItems) break;
      std::vector<int64_t>& dims = call.input_sizes.emplace_back();
      if (const PickleList* list = tensor.as_list()) {
        for (const PickleValue& dim : *list) {
          if (dims.size() == kMaxCollectiveItems) break;
          dims.push_back(dim.as_int() ? *dim.as_int() : -1);
        }
      }
    }
  }
  if (const PickleValue* dtypes = entry.get("input_dtypes"); dtypes && dtypes->as_list()) {
    for (const PickleValue& dtype : *dtypes->as_list()) {
      if (call.input_dtypes.size() == kMaxCollectiveItems) break;
      call.input_dtypes.push_back(dtype.as_string() ? capped(*dtype.as_string()) : "?");
    }
  }
  call.state = text_at(entry, "state").value_or("");
  return call;
}

// The process group an entry belongs to: process_group[0], else its pg_id as text.
std::optional<std::string> group_of(const PickleValue& entry) {
  if (const PickleValue* group = entry.get("process_group"); group && group->as_list()) {
    const PickleList& parts = *group->as_list();
    if (!parts.empty() && parts[0].as_string()) return capped(*parts[0].as_string());
  }
  if (auto id = int_at(entry, "pg_id")) return std::to_string(*id);
  return std::nullopt;
}

// The process groups of one dump by id, at most kMaxProcessGroups of them (more are ignored).
class GroupTable {
 public:
  // The group `id`, added if new; null when the table is full.
  GroupProgress* group(const std::string& id) {
    auto found = groups_.find(id);
    if (found != groups_.end()) return &found->second;
    if (groups_.size() >= kMaxProcessGroups) return nullptr;
    GroupProgress& added = groups_[id];
    added.id = id;
    return &added;
  }
  std::map<std::string, GroupProgress>& all() { return groups_; }

 private:
  std::map<std::string, GroupProgress> groups_;
};

// What the entries say of a group: its highest collective, and its highest completed one.
struct SeenCalls {
  std::optional<int64_t> highest, highest_completed;
};

// Each group of the dump's `section` (a dict by group id: pg_config, pg_status) with its entry.
template <typename Read>
void read_section(const PickleValue& dump, const char* section, GroupTable& groups, Read read) {
  const PickleValue* table = dump.get(section);
  if (table == nullptr || table->as_dict() == nullptr) return;
  for (const auto& [key, value] : *table->as_dict()) {
    const std::string* id = std::get_if<std::string>(&key);
    GroupProgress* progress = id ? groups.group(capped(*id)) : nullptr;
    if (progress != nullptr) read(*progress, value);
  }
}

// pg_config: each group's description and size.
void read_configs(const PickleValue& dump, GroupTable& groups) {
  read_section(dump, "pg_config", groups, [](GroupProgress& progress, const PickleValue& value) {
    if (auto desc = text_at(value, "desc")) progress.desc = *desc;
    if (const PickleValue* ranks = value.get("ranks"); ranks && ranks->as_string()) {
      progress.size = count_ranks(*ranks->as_string());
    }
  });
}

// pg_status: each group's last enqueued, started and completed collective.
void read_statuses(const PickleValue& dump, GroupTable& groups) {
  read_section(dump, "pg_status", groups, [](GroupProgress& progress, const PickleValue& value) {
    progress.last_enqueued = int_at(value, "last_enqueued_collective");
    progress.last_started = int_at(value, "last_started_collective");
    progress.last_completed = int_at(value, "last_completed_collective");
  });
}

// One collective of the entries: the group's description if it had none, its last call, its
// first incomplete one.
void read_entry(const PickleValue& entry, int64_t seq, GroupProgress& progress, SeenCalls& seen) {
  if (progress.desc.empty()) {
    if (const PickleValue* pg = entry.get("process_group"); pg && pg->as_list()) {
      const PickleList& parts = *pg->as_list();
      if (parts.size() > 1 && parts[1].as_string()) progress.desc = capped(*parts[1].as_string());
    }
  }
  std::optional<std::string> state = text_at(entry, "state");
  bool completed = state && *state == "completed";
  if (!seen.highest || seq >= *seen.highest) {
    seen.highest = seq;
    progress.last_call = call_of(entry, seq);
  }
  if (completed) {
    if (!seen.highest_completed || seq > *seen.highest_completed) seen.highest_completed = seq;
  } else if (!progress.first_incomplete || seq < progress.first_incomplete->seq) {
    progress.first_incomplete = call_of(entry, seq);
  }
}

// entries: each group's first incomplete collective and its last one. A send or recv is counted
// by p2p_seq_id, not in the collective order: skipped.
std::map<std::string, SeenCalls> read_entries(const PickleValue& dump, GroupTable& groups) {
  std::map<std::string, SeenCalls> seen;
  const PickleValue* entries = dump.get("entries");
  if (entries == nullptr || entries->as_list() == nullptr) return seen;
  for (const PickleValue& entry : *entries->as_list()) {
    if (const PickleValue* p2p = entry.get("is_p2p"); p2p && p2p->as_bool() && *p2p->as_bool()) {
      continue;
    }
    std::optional<int64_t> seq = int_at(entry, "collective_seq_id");
    std::optional<std::string> id = group_of(entry);
    if (!seq || !id) continue;
    GroupProgress* progress = groups.group(*id);
    if (progress == nullptr) continue;
    read_entry(entry, *seq, *progress, seen[*id]);
  }
  return seen;
}

}  // namespace

RankCollectives collective_progress(const PickleValue& dump) {
  RankCollectives out;
  if (dump.as_dict() == nullptr) return out;
  out.version = text_at(dump, "version").value_or("");
  out.comm_lib_version = text_at(dump, "comm_lib_version").value_or("");
  out.rank = int_at(dump, "rank");
  GroupTable groups;
  read_configs(dump, groups);
  read_statuses(dump, groups);
  std::map<std::string, SeenCalls> seen = read_entries(dump, groups);
  // Where pg_status did not say (older dumps), the entries tell.
  for (auto& [id, progress] : groups.all()) {
    auto found = seen.find(id);
    if (found == seen.end()) continue;
    if (!progress.last_enqueued) progress.last_enqueued = found->second.highest;
    if (!progress.last_completed) progress.last_completed = found->second.highest_completed;
  }
  out.groups.reserve(groups.all().size());
  for (auto& [id, progress] : groups.all()) out.groups.push_back(std::move(progress));
  return out;
}

PickleLimits dump_pickle_limits(size_t input_bytes) {
  PickleLimits limits;
  limits.max_values = std::clamp<size_t>(input_bytes, 64 << 10, limits.max_values);
  limits.max_string_bytes = std::clamp<size_t>(16 * input_bytes, 1 << 20, limits.max_string_bytes);
  return limits;
}

RankCollectivesResult read_collective_progress(std::string_view bytes) {
  return read_collective_progress(bytes, dump_pickle_limits(bytes.size()));
}

RankCollectivesResult read_collective_progress(std::string_view bytes, const PickleLimits& limits) {
  RankCollectivesResult result;
  PickleResult parsed = PickleReader(limits).read(bytes);
  if (!parsed.ok()) {
    result.error = "not a readable pickle: " + parsed.error;
    return result;
  }
  if (parsed.value->as_dict() == nullptr) {
    result.error = "not a flight-recorder dump: the pickle holds no dict";
    return result;
  }
  result.value = collective_progress(*parsed.value);
  return result;
}

}  // namespace cohort::observe
