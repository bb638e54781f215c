#include "observe/timeline.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "observe/event_text.hpp"

namespace cohort::observe {
namespace {

std::string text_of(const nlohmann::json& event, const char* key) {
  auto found = event.find(key);
  return found != event.end() && found->is_string() ? found->get<std::string>() : "";
}

int64_t number_of(const nlohmann::json& event, const char* key, int64_t otherwise = 0) {
  auto found = event.find(key);
  return found != event.end() && found->is_number() ? found->get<int64_t>() : otherwise;
}

// "local rank 1 on vm hung at step 120": hang.detected names the node's silent rank by its local
// rank (the node has no global ranks of its own to say), and the step where the agent knew it.
std::string hang_text(const nlohmann::json& event) {
  std::string where = text_of(event, "host");
  if (where.empty()) where = text_of(event, "node");
  int64_t rank = number_of(event, "local_rank", -1);
  std::string text = rank >= 0 ? "local rank " + std::to_string(rank) : "a rank";
  if (!where.empty()) text += " on " + where;
  text += " hung";
  if (int64_t step = number_of(event, "step", -1); step >= 0)
    text += " at step " + std::to_string(step);
  return text;
}

// Builds the timeline event by event; the open round is closed by the next one or the end.
class TimelineBuilder {
 public:
  TimelineBuilder(const std::string& run_id, int64_t now_ms) : now_ms_(now_ms) {
    timeline_.run_id = run_id;
    timeline_.outcome = "running";
  }

  void add(const nlohmann::json& event) {
    int64_t t = number_of(event, "t_ms");
    if (timeline_.start_ms == 0 || t < timeline_.start_ms) timeline_.start_ms = t;
    std::string name = text_of(event, "event");
    std::string node = text_of(event, "node");
    if (!node.empty() && name != "run.created") see_node(node);
    learn_names(event, node);
    if (name == "round.started") return start_round(event, t);
    if (name == "worker.failed") {
      return mark(TimelineMark::Kind::Failure, t, node,
                  "rank " + std::to_string(number_of(event, "rank", -1)) + ": " +
                      text_of(event, "status") + " " + text_of(event, "summary"));
    }
    if (name == "host.excluded") return exclude(event, t);
    if (name == "node.lost") {
      auto member = event.find("member");  // only a member's loss restarts the round
      if (member != event.end() && *member == true) recovery_from(t);
      return mark(TimelineMark::Kind::Lost, t, node, "lost: " + text_of(event, "reason"));
    }
    if (name == "hang.detected") return mark(TimelineMark::Kind::Hang, t, node, hang_text(event));
    if (name == "hang.attributed") {  // the whole round's: which collective, which rank
      return mark(TimelineMark::Kind::Hang, t, "", "collective: " + text_of(event, "text"));
    }
    if (name == "straggler") return mark(TimelineMark::Kind::Straggler, t, node, "straggler");
    if (name == "node.unhealthy")
      return mark(TimelineMark::Kind::Unhealthy, t, node, text_of(event, "reason"));
    if (name == "restart.decided") return restart(event, t);
    if (name == "run.completed" || name == "run.failed" || name == "run.stopped") {
      std::string reason = meaningful_line(text_of(event, "reason"));
      if (!reason.empty()) timeline_.root_cause = reason;
      end(name, t);
    }
    if (name == "run.abandoned") {  // its nodes went: no failure of its own, the last one stays
      end(name, t, meaningful_line(text_of(event, "reason")));
    }
  }

  Timeline finish() {
    close_round(ended_ ? timeline_.end_ms : now_ms_);
    if (!ended_) timeline_.end_ms = std::max(now_ms_, timeline_.start_ms);
    label_nodes();
    return std::move(timeline_);
  }

 private:
  void see_node(const std::string& node) {
    if (timeline_.rows.emplace(node, timeline_.nodes.size()).second)
      timeline_.nodes.push_back(node);
  }

  // A node's address (node.joined, a round's members) and host (any event that names one).
  void learn_names(const nlohmann::json& event, const std::string& node) {
    if (node.empty()) return;
    if (std::string address = text_of(event, "address"); !address.empty())
      addresses_[node] = address;
    if (std::string host = text_of(event, "host"); !host.empty()) hosts_[node] = host;
  }

  // "vm (127.0.0.2)", else "127.0.0.2", else the node id; a second node of the same label gets
  // " #2", a third " #3".
  void label_nodes() {
    std::map<std::string, int> seen;
    for (const std::string& node : timeline_.nodes) {
      auto address = addresses_.find(node);
      auto host = hosts_.find(node);
      std::string label = address == addresses_.end() ? node : address->second;
      if (host != hosts_.end() && host->second != label) label = host->second + " (" + label + ")";
      int count = ++seen[label];
      timeline_.labels.push_back(count == 1 ? label : label + " #" + std::to_string(count));
    }
  }

  // A host sits out: a mark on each node at that address, or across the run if none is known.
  void exclude(const nlohmann::json& event, int64_t t) {
    std::string host = text_of(event, "host");
    std::string text = "host " + host + " excluded for " +
                       std::to_string(number_of(event, "cooldown_ms") / 1000) + " s after " +
                       std::to_string(number_of(event, "failures")) + " root-cause failures";
    bool marked = false;
    for (const auto& [node, address] : addresses_) {
      if (address != host) continue;
      mark(TimelineMark::Kind::Excluded, t, node, text);
      marked = true;
    }
    if (!marked) mark(TimelineMark::Kind::Excluded, t, "", text);
  }

  // A restart after a failure or loss starts a recovery; a scale-up (nodes joined) does not.
  void restart(const nlohmann::json& event, int64_t t) {
    std::string reason = text_of(event, "reason");
    auto flag = event.find("scale_up");
    if ((flag != event.end() && *flag == true) || is_scale_up(reason)) {
      ++timeline_.scale_ups;
      return mark(TimelineMark::Kind::ScaleUp, t, "", "scale-up: " + reason);
    }
    recovery_from(t);
    timeline_.root_cause = meaningful_line(reason);
    mark(TimelineMark::Kind::Restart, t, "", "restart: " + reason);
  }

  void start_round(const nlohmann::json& event, int64_t t) {
    close_round(t);
    TimelineRound round;
    round.round = static_cast<int>(number_of(event, "round"));
    round.start_ms = t;
    round.world_size = static_cast<int>(number_of(event, "world_size"));
    auto members = event.find("members");
    if (members != event.end() && members->is_array()) {
      for (const auto& member : *members) {
        if (!member.is_object()) continue;
        TimelineMember seen{text_of(member, "node"),
                            static_cast<int>(number_of(member, "group_rank", -1)),
                            static_cast<int>(number_of(member, "local_world_size"))};
        see_node(seen.node);
        learn_names(member, seen.node);
        round.members.push_back(std::move(seen));
      }
    }
    timeline_.rounds.push_back(std::move(round));
    round_open_ = true;
    if (std::string resumed = resumed_text(event); !resumed.empty()) timeline_.resumed = resumed;
    if (recovering_since_) {
      timeline_.recoveries.push_back({*recovering_since_, t});
      recovering_since_.reset();
    }
  }

  void close_round(int64_t t) {
    if (round_open_) timeline_.rounds.back().end_ms = std::max(t, timeline_.rounds.back().start_ms);
    round_open_ = false;
  }

  void recovery_from(int64_t t) {
    if (!recovering_since_ && !timeline_.rounds.empty()) recovering_since_ = t;
  }

  void mark(TimelineMark::Kind kind, int64_t t, const std::string& node, std::string text) {
    timeline_.marks.push_back({kind, t, node, std::move(text)});
  }

  void end(const std::string& name, int64_t t, const std::string& why = {}) {
    close_round(t);
    ended_ = true;
    timeline_.end_ms = t;
    timeline_.outcome = name.substr(4);  // "completed", "failed", "stopped", "abandoned"
    recovering_since_.reset();
    mark(TimelineMark::Kind::End, t, "",
         why.empty() ? timeline_.outcome : timeline_.outcome + ": " + why);
  }

  Timeline timeline_;
  int64_t now_ms_;
  bool round_open_ = false;
  bool ended_ = false;
  std::optional<int64_t> recovering_since_;
  std::map<std::string, std::string> addresses_;  ///< by node id
  std::map<std::string, std::string> hosts_;      ///< by node id
};

}  // namespace

Timeline build_timeline(const std::string& run_id, const std::vector<nlohmann::json>& events,
                        int64_t now_ms) {
  TimelineBuilder builder(run_id, now_ms);
  for (const auto& event : events) {
    if (event.is_object()) builder.add(event);
  }
  return builder.finish();
}

}  // namespace cohort::observe
