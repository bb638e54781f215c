#include "observe/event_text.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "common/event_log.hpp"
#include "common/text.hpp"

namespace cohort::observe {
namespace {

std::string text_of(const nlohmann::json& event, const char* key) {
  auto found = event.find(key);
  return found != event.end() && found->is_string() ? found->get<std::string>() : "";
}

std::optional<int64_t> number_of(const nlohmann::json& event, const char* key) {
  auto found = event.find(key);
  if (found == event.end() || !found->is_number()) return std::nullopt;
  return found->get<int64_t>();
}

std::string number_text(const nlohmann::json& event, const char* key) {
  std::optional<int64_t> number = number_of(event, key);
  return number ? std::to_string(*number) : "?";
}

// "1 round", "3 rounds", "? rounds".
std::string counted(const nlohmann::json& event, const char* key, const std::string& noun) {
  std::string number = number_text(event, key);
  return number + " " + noun + (number == "1" ? "" : "s");
}

std::string ms_text(const nlohmann::json& event, const char* key) {
  std::optional<int64_t> ms = number_of(event, key);
  return ms ? format_duration(std::chrono::milliseconds(*ms)) : "?";
}

// A value of an event that has no words of its own: a string by its meaningful line, an array
// of scalars as a list, anything else as compact JSON.
std::string value_text(const nlohmann::json& value) {
  if (value.is_string()) return meaningful_line(value.get<std::string>());
  if (value.is_array() && std::none_of(value.begin(), value.end(), [](const nlohmann::json& item) {
        return item.is_structured();
      })) {
    std::vector<std::string> items;
    for (const auto& item : value) items.push_back(value_text(item));
    return join(items, ",");
  }
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// key=value for every field but the envelope and those already said.
std::string other_fields(const nlohmann::json& event, std::initializer_list<const char*> said) {
  std::string text;
  for (const auto& [key, value] : event.items()) {
    if (is_envelope_key(key) || std::find(said.begin(), said.end(), key) != said.end()) continue;
    text += (text.empty() ? "" : "  ") + key + "=" + value_text(value);
  }
  return text;
}

std::string with(std::string text, const std::string& more) {
  return more.empty() ? text : text + "  " + more;
}

// The node an event is about: its host when the event names one, else the node id.
std::string node_of(const nlohmann::json& event) {
  std::string host = text_of(event, "host"), node = text_of(event, "node");
  if (!host.empty() && !node.empty()) return host + " (" + node + ")";
  return node.empty() ? host : node;
}

std::string worker_failed_text(const nlohmann::json& event) {
  std::string text = "rank " + number_text(event, "rank") + " (local " +
                     number_text(event, "local_rank") + ") on " + node_of(event) + ", round " +
                     number_text(event, "round") + ": " + text_of(event, "status");
  std::string why = meaningful_line(text_of(event, "summary"));
  if (why.empty()) why = meaningful_line(text_of(event, "error"));
  if (!why.empty()) text += ": " + why;
  return with(text, other_fields(event, {"node", "host", "rank", "local_rank", "round", "status",
                                         "summary", "error"}));
}

std::string restart_text(const nlohmann::json& event) {
  std::string reason = meaningful_line(text_of(event, "reason"));
  std::string text = (is_scale_up(reason) ? "new round after round " : "restart after round ") +
                     number_text(event, "round") + ": " + reason + " (restarts used " +
                     number_text(event, "restarts_used") + ", left " +
                     number_text(event, "restarts_left") + ")";
  return with(text, other_fields(event, {"round", "reason", "restarts_used", "restarts_left",
                                         "backoff_ms", "scale_up"}));
}

std::string hang_text(const nlohmann::json& event) {
  std::string step =
      number_of(event, "step") ? " at step " + number_text(event, "step") : std::string();
  std::string text = "local rank " + number_text(event, "local_rank") + " on " + node_of(event) +
                     " hung" + step + ", silent for " + ms_text(event, "silent_ms");
  return with(text,
              other_fields(event, {"node", "host", "local_rank", "round", "step", "silent_ms"}));
}

std::string event_text(const std::string& name, const nlohmann::json& event) {
  if (name == "run.created") {
    return "nodes " + number_text(event, "min_nodes") + ":" + number_text(event, "max_nodes") +
           ", up to " + number_text(event, "max_restarts") + " restarts";
  }
  if (name == "node.joined") {
    return text_of(event, "address") + " joined with " + number_text(event, "local_world_size") +
           " workers (node " + text_of(event, "node") + ")";
  }
  if (name == "node.left") return node_of(event) + " left: " + text_of(event, "reason");
  if (name == "node.lost") {
    std::string silence = number_of(event, "silent_ms")
                              ? " after " + ms_text(event, "silent_ms") + " of silence"
                              : "";
    return node_of(event) + " lost" + silence + ": " + text_of(event, "reason");
  }
  if (name == "round.started") {
    auto members = event.find("members");
    std::string ranks = number_text(event, "world_size");
    std::string resumed = resumed_text(event);
    if (!resumed.empty()) resumed = "; " + resumed;
    return "round " + number_text(event, "round") + ", " + ranks +
           (ranks == "1" ? " rank: " : " ranks: ") +
           (members == event.end() ? "" : members_text(*members)) + resumed;
  }
  if (name == "worker.failed") return worker_failed_text(event);
  if (name == "restart.decided") return restart_text(event);
  if (name == "hang.detected") return hang_text(event);
  if (name == "hang.attributed") {
    return text_of(event, "classification") + ": " + text_of(event, "text");
  }
  if (name == "straggler") return text_of(event, "text");
  if (name == "node.unhealthy") return node_of(event) + " unhealthy: " + text_of(event, "reason");
  if (name == "node.healthy") return node_of(event) + " healthy again";
  if (name == "host.excluded") {
    return "host " + text_of(event, "host") + " excluded for " + ms_text(event, "cooldown_ms") +
           " after " + number_text(event, "failures") + " root-cause failures";
  }
  if (name == "run.completed") {
    return "after " + counted(event, "rounds", "round") + ", " +
           counted(event, "restarts_used", "restart");
  }
  if (name == "run.abandoned") return meaningful_line(text_of(event, "reason"));
  if (name == "run.failed" || name == "run.stopped") {
    std::string by = text_of(event, "by"), asked = text_of(event, "requested_by");
    return (by.empty() ? "" : "by " + by + (asked.empty() ? "" : " (" + asked + ")") + ": ") +
           meaningful_line(text_of(event, "reason")) + " (exit status " +
           number_text(event, "exit_status") + ")";
  }
  return "";
}

}  // namespace

std::string meaningful_line(const std::string& text) {
  for (const std::string& line : split(text, '\n')) {
    std::string_view trimmed = trim(line);
    if (trimmed.find_first_not_of("=-* \t\r") != std::string_view::npos)
      return std::string(trimmed);
  }
  return "";
}

std::string members_text(const nlohmann::json& members) {
  if (!members.is_array()) return "";
  std::vector<const nlohmann::json*> sorted;
  for (const auto& member : members) {
    if (member.is_object()) sorted.push_back(&member);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return number_of(*a, "group_rank").value_or(0) < number_of(*b, "group_rank").value_or(0);
  });
  std::vector<std::string> parts;
  int64_t base = 0;
  for (const nlohmann::json* member : sorted) {
    int64_t count = std::max<int64_t>(number_of(*member, "local_world_size").value_or(0), 0);
    std::string where = text_of(*member, "address");
    if (where.empty()) where = text_of(*member, "node");
    std::string host = text_of(*member, "host");
    if (!host.empty() && host != where) where = host + " (" + where + ")";
    std::string ranks =
        count == 1   ? "rank " + std::to_string(base)
        : count == 0 ? "no ranks"
                     : "ranks " + std::to_string(base) + "-" + std::to_string(base + count - 1);
    parts.push_back(where + " " + ranks);
    base += count;
  }
  return join(parts, ", ");
}

bool is_scale_up(const std::string& reason) { return reason.rfind("scale-up", 0) == 0; }

std::string resumed_text(int resumed_after, const std::string& moved_from) {
  if (resumed_after < 0) return {};
  std::string after = "resumed here after round " + std::to_string(resumed_after);
  if (moved_from.empty()) return after + " (the daemon restarted)";
  return after + ", which ran at " + moved_from + " (--rdzv-fallback)";
}

std::string resumed_text(const nlohmann::json& round_started) {
  auto after = round_started.find("resumed_after");
  if (after == round_started.end() || !after->is_number_integer()) return {};
  return resumed_text(after->get<int>(), text_of(round_started, "moved_from"));
}

std::string moved_text(const std::string& to) {
  return "moved to " + to +
         " (its nodes left this daemon for it: ask there, or give --rdzv-fallback)";
}

std::string event_details_text(const nlohmann::json& event) {
  if (!event.is_object()) return "";
  std::string name = text_of(event, "event");
  std::string text = event_text(name, event);
  if (!text.empty()) return text;
  return other_fields(event, {});
}

std::string event_line(const nlohmann::json& event) {
  if (!event.is_object()) return value_text(event);
  std::string time = text_of(event, "time");
  size_t clock = time.find('T');
  std::string when = clock == std::string::npos ? time : time.substr(clock + 1);
  if (!when.empty() && when.back() == 'Z') when.pop_back();
  std::string text = when + "  " + text_of(event, "event") + "  " + event_details_text(event);
  for (char& c : text) c = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  return text;
}

}  // namespace cohort::observe
