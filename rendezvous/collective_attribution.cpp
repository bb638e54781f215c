#include "rendezvous/collective_attribution.hpp"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_set>

#include "common/text.hpp"

namespace cohort::rdzv {

using observe::CollectiveCall;
using observe::GroupProgress;

const char* divergence_name(Divergence divergence) {
  switch (divergence) {
    case Divergence::kNone:
      return "none";
    case Divergence::kUnknown:
      return "unknown";
    case Divergence::kMissing:
      return "missing";
    case Divergence::kDesync:
      return "desync";
    case Divergence::kStuck:
      return "stuck";
  }
  return "unknown";
}

std::string rank_ranges_text(const std::vector<int>& ranks, size_t max_chars) {
  std::string text;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t end = i;
    while (end + 1 < ranks.size() && ranks[end + 1] == ranks[end] + 1) ++end;
    std::string range = std::to_string(ranks[i]);
    if (end > i) range += "-" + std::to_string(ranks[end]);
    std::string piece = text.empty() ? range : "," + range;
    if (text.size() + piece.size() > max_chars && !text.empty()) {
      return text + ",... (" + std::to_string(ranks.size() - i) + " more)";
    }
    text += piece;
    i = end + 1;
  }
  return text;
}

namespace {

constexpr size_t kMaxHostsNamed = 3;
constexpr size_t kMaxPartiesNamed = 3;

// One member of a group: a rank whose dump has it.
struct Member {
  int rank = 0;
  const std::string* host = nullptr;
  const GroupProgress* progress = nullptr;
  std::optional<int64_t> wait_seq;  // the first collective it has not completed
};

std::string ranks_word(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges_text(ranks);
}

std::string count_word(size_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// Host names in the order first seen, each once, empty ones left out: linear in the ranks (a
// verdict may name a hundred thousand of them).
class DistinctHosts {
 public:
  void add(const std::string& host) {
    if (!host.empty() && seen_.insert(host).second) hosts_.push_back(host);
  }
  std::vector<std::string> take() { return std::move(hosts_); }

 private:
  std::unordered_set<std::string_view> seen_;  // views of the callers' strings
  std::vector<std::string> hosts_;
};

std::vector<std::string> hosts_of(const std::vector<int>& ranks,
                                  const std::map<int, RankDumpRecords>& dumps) {
  DistinctHosts hosts;
  for (int rank : ranks) {
    auto found = dumps.find(rank);
    if (found != dumps.end()) hosts.add(found->second.host);
  }
  return hosts.take();
}

// " (node-b)", " (node-b, node-c, node-d and 2 more hosts)", or "".
std::string hosts_text(const std::vector<std::string>& hosts) {
  if (hosts.empty()) return "";
  std::vector<std::string> named(hosts.begin(), hosts.begin() + static_cast<ptrdiff_t>(std::min(
                                                                    hosts.size(), kMaxHostsNamed)));
  std::string text = " (" + join(named, ", ");
  if (hosts.size() > named.size()) {
    text += " and " + count_word(hosts.size() - named.size(), "more host", "more hosts");
  }
  return text + ")";
}

std::optional<int64_t> wait_seq(const GroupProgress& group) {
  if (group.first_incomplete &&
      (!group.last_completed || group.first_incomplete->seq > *group.last_completed)) {
    return group.first_incomplete->seq;
  }
  if (group.last_enqueued && group.last_completed && *group.last_enqueued > *group.last_completed) {
    return *group.last_completed + 1;
  }
  return std::nullopt;
}

// The collective a member waits in at `seq`, when its dump still holds it.
const CollectiveCall* call_at(const Member& member, int64_t seq) {
  const auto& call = member.progress->first_incomplete;
  return call && call->seq == seq ? &*call : nullptr;
}

std::string signature(const CollectiveCall& call) { return call.op + " " + call.shape_text(); }

// "#4119 (_allgather_base)": what a rank enqueued last in the group.
std::string last_text(const GroupProgress& group) {
  if (!group.last_enqueued || *group.last_enqueued < 0) return "none";
  std::string text = "#" + std::to_string(*group.last_enqueued);
  if (group.last_call && group.last_call->seq == *group.last_enqueued &&
      !group.last_call->op.empty()) {
    text += " (" + group.last_call->op + ")";
  }
  return text;
}

// How many ranks the group has, by its members' pg_config (the most any says), or by how many
// reported it when none says.
size_t group_size(const std::vector<Member>& members) {
  size_t size = members.size();
  for (const Member& member : members) {
    if (member.progress->size && *member.progress->size > 0)
      size = std::max(size, static_cast<size_t>(*member.progress->size));
  }
  return size;
}

GroupAttribution judge(const std::string& id, const std::vector<Member>& members,
                       const std::map<int, RankDumpRecords>& dumps, bool some_without_dump) {
  GroupAttribution out;
  out.pg = id;
  out.ranks = static_cast<int>(members.size());
  for (const Member& member : members) {
    if (out.pg_desc.empty()) out.pg_desc = member.progress->desc;
  }
  std::optional<int64_t> first;
  for (const Member& member : members) {
    if (member.wait_seq && (!first || *member.wait_seq < *first)) first = member.wait_seq;
  }
  if (!first) return out;  // kNone: nobody waits
  const int64_t seq = *first;
  out.seq = seq;

  // The parties among the ranks waiting in `seq`: by what they enqueued as it.
  std::map<std::string, std::vector<int>> parties;
  std::map<std::string, std::string> party_op;
  std::vector<int> waiting_at_seq, missing;
  std::set<std::string> missing_lasts;  // what the missing ranks enqueued last
  for (const Member& member : members) {
    if (member.wait_seq == seq) {
      waiting_at_seq.push_back(member.rank);
      if (const CollectiveCall* call = call_at(member, seq)) {
        parties[signature(*call)].push_back(member.rank);
        party_op[signature(*call)] = call->op;
      }
    } else if (member.progress->last_enqueued && *member.progress->last_enqueued < seq) {
      missing.push_back(member.rank);
      missing_lasts.insert(last_text(*member.progress));
    }
  }
  // Parties by size, the largest first (a tie: the one with the lowest rank).
  std::vector<std::pair<std::string, std::vector<int>>> ordered(parties.begin(), parties.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
    return a.second.front() < b.second.front();
  });
  out.op = ordered.empty() ? "" : party_op[ordered.front().first];
  std::string head = cat(out.op.empty() ? "collective" : out.op, " #", seq, " on ",
                         out.pg_desc.empty() ? "process group " + id : out.pg_desc, " (",
                         count_word(members.size(), "rank", "ranks"), "): ");
  std::string waits =
      cat(count_word(waiting_at_seq.size(), "rank", "ranks"),
          waiting_at_seq.size() == 1 ? " enqueued it and waits" : " enqueued it and wait");

  if (!missing.empty()) {
    out.divergence = Divergence::kMissing;
    out.waiting = waiting_at_seq;
    out.culprits = missing;
    out.culprit_hosts = hosts_of(missing, dumps);
    const std::set<std::string>& lasts = missing_lasts;
    std::string last =
        lasts.size() == 1
            ? (missing.size() == 1 ? ", its last was " : ", their last was ") + *lasts.begin()
            : ", their last were " + *lasts.begin() + " to " + *lasts.rbegin();
    out.text = cat(head, waits, "; ", ranks_word(missing), hosts_text(out.culprit_hosts),
                   " never did", last);
    return out;
  }
  if (ordered.size() > 1) {
    out.divergence = Divergence::kDesync;
    out.waiting = ordered.front().second;
    for (size_t i = 1; i < ordered.size(); ++i) {
      out.culprits.insert(out.culprits.end(), ordered[i].second.begin(), ordered[i].second.end());
    }
    std::sort(out.culprits.begin(), out.culprits.end());
    out.culprit_hosts = hosts_of(out.culprits, dumps);
    std::vector<std::string> named;
    for (size_t i = 0; i < ordered.size() && i < kMaxPartiesNamed; ++i) {
      const std::vector<int>& ranks = ordered[i].second;
      named.push_back(cat(ranks_word(ranks), i == 0 ? "" : hosts_text(hosts_of(ranks, dumps)),
                          " enqueued ", ordered[i].first));
    }
    if (ordered.size() > kMaxPartiesNamed) {
      named.push_back(cat("and ", ordered.size() - kMaxPartiesNamed, " more parties"));
    }
    out.text = cat(head, "ranks disagree on it: ", join(named, "; "));
    return out;
  }
  out.waiting = waiting_at_seq;
  // Stuck only when every rank of the group reported it: a rank whose report left the group out
  // (a report carries a rank's first 8 groups) may be the one that never enqueued it.
  size_t size = group_size(members);
  if (waiting_at_seq.size() == members.size() && !some_without_dump && size == members.size()) {
    out.divergence = Divergence::kStuck;
    bool all_started = true;
    for (const Member& member : members) {
      const CollectiveCall* call = call_at(member, seq);
      if (call == nullptr || !call->started()) all_started = false;
    }
    out.text = cat(head,
                   all_started ? "every rank started it and none completed it"
                               : "every rank enqueued it and none completed it (no start recorded)",
                   ": stuck in the network or on a GPU");
    return out;
  }
  out.divergence = Divergence::kUnknown;
  std::vector<int> others;
  for (const Member& member : members) {
    if (member.wait_seq != seq) others.push_back(member.rank);
  }
  out.text = cat(head, waits);
  if (!others.empty()) out.text += cat("; ", ranks_word(others), " completed it or show no wait");
  if (size > members.size() && !some_without_dump)  // those are named with the verdict
    out.text += cat("; ", size - members.size(), " of its ", size, " ranks did not report it");
  return out;
}

// The group to name first: of the missing collectives, the one with the fewest culprits that
// wait in another group (those are held up there: a consequence, not the root); then desync,
// stuck, unknown.
std::optional<size_t> primary_of(const std::vector<GroupAttribution>& groups) {
  // A missing group's culprits never wait in it (they did not reach its collective): one that
  // waits in any group waits in another.
  std::unordered_set<int> waiting_somewhere;
  for (const GroupAttribution& group : groups) {
    waiting_somewhere.insert(group.waiting.begin(), group.waiting.end());
  }
  std::optional<size_t> best;
  size_t best_held = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].divergence != Divergence::kMissing) continue;
    size_t held = 0;
    for (int rank : groups[i].culprits) held += waiting_somewhere.count(rank);
    if (!best || held < best_held) {
      best = i;
      best_held = held;
    }
  }
  if (best) return best;
  for (Divergence wanted : {Divergence::kDesync, Divergence::kStuck, Divergence::kUnknown}) {
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].divergence == wanted) return i;
    }
  }
  return std::nullopt;
}

}  // namespace

CollectiveAttribution attribute_collectives(const std::map<int, RankDumpRecords>& dumps,
                                            const std::map<int, RankWithoutDump>& without_dump) {
  CollectiveAttribution out;
  std::map<std::string, std::vector<Member>> groups;
  for (const auto& [rank, dump] : dumps) {
    for (const GroupProgress& group : dump.collectives.groups) {
      groups[group.id].push_back(Member{rank, &dump.host, &group, wait_seq(group)});
    }
  }
  for (const auto& [id, members] : groups) {
    GroupAttribution verdict = judge(id, members, dumps, !without_dump.empty());
    if (verdict.divergence != Divergence::kNone) out.groups.push_back(std::move(verdict));
  }
  out.primary = primary_of(out.groups);

  DistinctHosts distinct;
  for (const auto& [rank, missing] : without_dump) {
    out.without_dump.push_back(rank);
    distinct.add(missing.host);
  }
  std::vector<std::string> hosts = distinct.take();
  out.text = out.primary ? out.groups[*out.primary].text
                         : "no collective waits in the flight-recorder dumps";
  if (!out.without_dump.empty()) {
    out.text += cat("; no dump from ", ranks_word(out.without_dump), hosts_text(hosts));
  }
  return out;
}

CollectiveAttribution attribute_dump_files(const std::map<int, RankDumpFile>& files) {
  std::map<int, RankDumpRecords> dumps;
  std::map<int, RankWithoutDump> without_dump;
  for (const auto& [rank, file] : files) {
    if (!file.bytes) {
      without_dump[rank] = RankWithoutDump{file.host, "no dump"};
      continue;
    }
    observe::RankCollectivesResult read = observe::read_collective_progress(*file.bytes);
    if (read.value) {
      dumps[rank] = RankDumpRecords{file.host, std::move(*read.value)};
    } else {
      without_dump[rank] = RankWithoutDump{file.host, read.error};
    }
  }
  return attribute_collectives(dumps, without_dump);
}

}  // namespace cohort::rdzv
