#include "launcher/cli/stop_command.hpp"

#include <pwd.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>

#include "common/exit_codes.hpp"
#include "common/run_id.hpp"
#include "common/text.hpp"
#include "launcher/cli/control_request.hpp"
#include "proto/auth.hpp"
#include "proto/wire_text.hpp"

namespace cohort {

void add_stop_flags(CLI::App& app, StopQuery& query) {
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", query.endpoint, "host[:port] of the daemon")
      ->capture_default_str();
  app.add_option("--rdzv-id,--rdzv_id", query.run_id, "The run to stop")->required();
  app.add_option(
      "--rdzv-fallback,--rdzv_fallback", query.fallbacks,
      "host[:port],... where the run's rendezvous may have moved (as given to cohort run): "
      "asked in turn when --rdzv-endpoint does not have the run");
  app.add_option("--reason", query.reason,
                 "Why (recorded in the run's events and each node's log; default: "
                 "\"stopped by cohort stop\")");
  app.add_option("--token-file", query.token_file,
                 "The daemon's or the run's token (default: $COHORT_TOKEN)");
  add_timeout_flag(app, query.timeout_ms);
}

std::string stop_requester_text(std::string_view user, std::string_view host) {
  return proto::cut_at_character(proto::as_sent(cat(user, "@", host)), proto::kMaxStopByBytes);
}

std::string stop_requester() {
  std::string user;
  if (const char* name = std::getenv("USER"); name != nullptr) user = name;
  if (user.empty()) {
    if (const passwd* entry = ::getpwuid(::getuid()); entry != nullptr) user = entry->pw_name;
  }
  if (user.empty()) user = "uid " + std::to_string(::getuid());
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return stop_requester_text(user, host[0] != '\0' ? host.data() : "unknown host");
}

// The proof covers reason and by as the daemon decodes them (as_sent): proven over the bytes
// given, a reason or login name that is not valid UTF-8 failed with the right token.
proto::StopRunRequest stop_request(const StopQuery& query, const std::string& challenge,
                                   const std::string& client_nonce) {
  proto::StopRunRequest request{
      query.run_id, proto::as_sent(query.reason), "",
      proto::cut_at_character(proto::as_sent(query.by), proto::kMaxStopByBytes), client_nonce};
  if (!query.token.empty()) {
    request.proof =
        proto::stop_proof(query.token, challenge, request.run_id, request.reason, request.by);
  }
  return request;
}

int run_stop_command(const StopQuery& query) {
  if (std::string problem = run_id_problem(query.run_id); !problem.empty()) {
    std::cerr << "cohort stop: --rdzv-id: " << problem << "\n";
    return kExitUsage;
  }
  if (std::any_of(query.reason.begin(), query.reason.end(),
                  [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    std::cerr << "cohort stop: --reason: one line of text, without line breaks, tabs or other "
                 "control characters (it is shown in logs, events and cohort status)\n";
    return kExitUsage;
  }
  if (proto::as_sent(query.reason).size() > proto::kMaxStopReasonBytes) {
    std::cerr << "cohort stop: --reason: at most " << proto::kMaxStopReasonBytes
              << " bytes (as UTF-8, each invalid byte as the 3 of U+FFFD)\n";
    return kExitUsage;
  }
  AnswerCheck check(query.token, "stop", query.run_id);
  ControlAnswer answer = control_request(
      query.endpoint, query.timeout_ms,
      [&](const std::string& challenge) {
        return stop_request(query, challenge, check.nonce_for(challenge));
      },
      proto::kMaxFrameBytes);  // a stop's answer is a line; never a status reply's 64 MiB
  std::string problem;
  std::optional<proto::StopRunReply> reply =
      proven_answer_as<proto::StopRunReply>(answer, check, problem);
  if (!reply) {
    // A usage problem names its flag already; an answer's names the daemon.
    std::string where = answer.exit_code == kExitUsage ? "" : query.endpoint + ": ";
    std::cerr << "cohort stop: " << where << escape_for_terminal(problem) << "\n";
    return answer.exit_code == kExitUsage ? kExitUsage : kExitRendezvous;
  }
  if (!reply->stopped) {
    std::cout << "run " << escape_for_terminal(reply->run_id) << " had already ended\n";
  } else {
    std::cout << "run " << escape_for_terminal(reply->run_id) << ": " << reply->nodes
              << " node(s) told to stop their workers\n";
  }
  return kExitSuccess;
}

}  // namespace cohort
