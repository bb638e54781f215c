#include "launcher/cli/stop_command.hpp"

#include <catch2/catch.hpp>

#include "proto/auth.hpp"
#include "proto/wire_text.hpp"

using namespace cohort;

namespace {

const std::string kToken = "the daemon's token, 32 bytes...";
const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD

// The request as the daemon receives it: encoded, then decoded (its bounds checked).
proto::StopRunRequest received(const proto::StopRunRequest& sent) {
  std::string error;
  std::optional<proto::ControlMessage> message =
      proto::decode_message(proto::encode_message(sent), error);
  INFO(error);
  REQUIRE(message);
  REQUIRE(std::holds_alternative<proto::StopRunRequest>(*message));
  return std::get<proto::StopRunRequest>(*message);
}

// What the daemon checks: the proof over the reason and by it decoded.
bool proof_holds(const proto::StopRunRequest& got) {
  return got.proof == proto::stop_proof(kToken, "challenge", got.run_id, got.reason, got.by);
}

}  // namespace

TEST_CASE("a stop's proof holds for a reason and a user that are not valid UTF-8",
          "[unit][launcher][stop]") {
  StopQuery query;
  query.run_id = "job1";
  query.token = kToken;
  query.reason = "Wartung f\xfcr Knoten";  // Latin-1
  query.by = stop_requester_text("r\xe9my", "node1");
  proto::StopRunRequest got = received(stop_request(query, "challenge", "nonce"));
  CHECK(proof_holds(got));
  CHECK(got.reason == "Wartung f" + kReplacement + "r Knoten");
  CHECK(got.by == "r" + kReplacement + "my@node1");
}

TEST_CASE("a long user at host is cut to its bound at a character and still proven",
          "[unit][launcher][stop]") {
  std::string user = "x";
  for (int i = 0; i < 128; ++i) user += "\xc3\xa9";  // é: 257 bytes, the cut falls inside one
  std::string by = stop_requester_text(user, "node1");
  CHECK(by.size() == proto::kMaxStopByBytes - 1);
  CHECK(proto::as_sent(by) == by);  // no piece of a character left to replace
  StopQuery query;
  query.run_id = "job1";
  query.token = kToken;
  query.by = std::string(255, 'u') + "\xc3\xa9";  // cut here too, whoever set it
  proto::StopRunRequest got = received(stop_request(query, "challenge", "nonce"));
  CHECK(got.by == std::string(255, 'u'));
  CHECK(proof_holds(got));
  query.by = std::string(300, '\xff');  // each byte 3 once replaced: cut after the sending
  got = received(stop_request(query, "challenge", "nonce"));
  CHECK(got.by.size() == 255);
  CHECK(proof_holds(got));
}

TEST_CASE("text as sent: invalid UTF-8 is replaced as the encoder replaces it",
          "[unit][proto][stop]") {
  CHECK(proto::as_sent("plain \xc3\xa9") == "plain \xc3\xa9");
  CHECK(proto::as_sent("a\xff"
                       "b") == "a" + kReplacement + "b");
  CHECK(proto::as_sent("\xe2\x82"
                       "x") == kReplacement + "x");  // a character cut short
  CHECK(proto::cut_at_character("ab\xc3\xa9", 3) == "ab");
  CHECK(proto::cut_at_character("ab\xc3\xa9", 4) == "ab\xc3\xa9");
}
