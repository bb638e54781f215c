#include "agent/console_events.hpp"

#include "common/text.hpp"

namespace cohort::events {

std::string line(const std::string& name, const Fields& fields) {
  std::string text = "cohort event: " + name;
  for (const auto& [key, value] : fields) {
    bool quote = value.empty() || value.find_first_of(" \t\"") != std::string::npos;
    text += " " + key + "=" + (quote ? "\"" + value + "\"" : value);
  }
  return escape_for_terminal(text) + "\n";
}

std::string run_started(const std::string& run_id, const std::string& host, int nproc) {
  return line("agent.start",
              {{"run_id", run_id}, {"host", host}, {"local_world_size", std::to_string(nproc)}});
}

std::string round_complete(const std::string& run_id, const proto::RoundAssigned& round) {
  return line("rendezvous.complete", {{"run_id", run_id},
                                      {"round", std::to_string(round.round)},
                                      {"group_rank", std::to_string(round.group_rank)},
                                      {"group_world_size", std::to_string(round.group_world_size)},
                                      {"world_size", std::to_string(round.world_size)},
                                      {"master", cat(round.master_addr, ":", round.master_port)},
                                      {"restarts_used", std::to_string(round.restarts_used)}});
}

std::string worker_failed(const std::string& run_id, int round, const WorkerFailure& failure) {
  return line("worker.failed", {{"run_id", run_id},
                                {"round", std::to_string(round)},
                                {"rank", std::to_string(failure.rank)},
                                {"local_rank", std::to_string(failure.local_rank)},
                                {"pid", std::to_string(failure.pid)},
                                {"status", failure.status.describe()}});
}

std::string restarting(const std::string& run_id, const std::string& reason) {
  return line("worker_group.restart", {{"run_id", run_id}, {"reason", reason}});
}

std::string run_ended(const std::string& run_id, int exit_code) {
  return line("agent.end", {{"run_id", run_id}, {"exit_code", std::to_string(exit_code)}});
}

}  // namespace cohort::events
