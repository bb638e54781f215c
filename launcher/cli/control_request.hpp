// One request to a rendezvous daemon on a fresh control connection, as `cohort status` and
// `cohort stop` make them: connect, read the daemon's challenge, send the request built from it
// (its proof answers the challenge), read one answer. Blocking, with one deadline for the connect
// and the whole exchange, which neither a peer that accepts and stays silent nor one dripping
// bytes can extend. Main thread.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "launcher/options/cli_fwd.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

struct ControlAnswer {
  std::optional<proto::ControlMessage> message;  ///< the daemon's answer (maybe an Error)
  int exit_code = 0;                             ///< without an answer: why, as an exit code
  std::string problem;                           ///< without an answer: what went wrong
};

/// `endpoint` is host[:port] (29400 by default). The challenge may be at most
/// proto::kMaxFirstFrameBytes, the answer at most `max_answer_bytes` (a status or events reply
/// may be large; a stop's is small), so that whatever answers cannot make the tool hold more.
ControlAnswer control_request(
    const std::string& endpoint, int timeout_ms,
    const std::function<proto::ControlMessage(const std::string& challenge)>& make_request,
    uint32_t max_answer_bytes = proto::kMaxStatusFrameBytes);

/// `--timeout SECONDS` (0.1 to 600; default: what `timeout_ms` holds) of a command that makes
/// control requests (status, stop), into `timeout_ms`.
void add_timeout_flag(CLI::App& app, int& timeout_ms);

/// The tool's side of the daemon's proof (with a token): a fresh nonce sent with the request,
/// and the answer's proof checked against it and the connection's challenge, so that an
/// endpoint posing as the daemon cannot show a made-up status or claim a stop it did not make.
/// Main thread.
class AnswerCheck {
 public:
  /// `kind` as proto::answer_proof takes it ("status", "events", "stop").
  AnswerCheck(std::string token, std::string kind, std::string run_id);
  /// The nonce to send with the request (empty without a token); remembers `challenge`.
  const std::string& nonce_for(const std::string& challenge);
  /// Empty when the answer's `proof` holds for its `digest` (always, without a token), else why
  /// not.
  std::string problem(const std::string& proof, const std::string& digest) const;

 private:
  std::string token_, kind_, run_id_, nonce_, challenge_;
};

/// The answer as a T, or nullopt with `problem` saying why not ("refused: <the daemon's error>").
template <typename T>
std::optional<T> answer_as(ControlAnswer& answer, std::string& problem) {
  if (answer.message) {
    if (auto* typed = std::get_if<T>(&*answer.message)) return std::move(*typed);
    if (auto* refusal = std::get_if<proto::Error>(&*answer.message)) {
      problem = refusal->message;
    } else {
      problem = std::string("unexpected answer ") + proto::message_type(*answer.message);
    }
    return std::nullopt;
  }
  problem = answer.problem;
  return std::nullopt;
}

/// answer_as, and then the answer's proof checked: nullopt with `problem` saying why when it does
/// not hold.
template <typename T>
std::optional<T> proven_answer_as(ControlAnswer& answer, const AnswerCheck& check,
                                  std::string& problem) {
  std::optional<T> reply = answer_as<T>(answer, problem);
  if (reply && !(problem = check.problem(reply->proof, reply->digest)).empty()) return std::nullopt;
  return reply;
}

}  // namespace cohort
