#include <catch2/catch.hpp>
#include <functional>

#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"
#include "proto/untrusted_json.hpp"

using namespace cohort::proto;

TEST_CASE("frames carry a big-endian length", "[unit][proto]") {
  std::string frame = encode_frame("abc");
  CHECK(frame == std::string("\0\0\0\3abc", 7));
}

TEST_CASE("the frame decoder takes any split", "[unit][proto]") {
  std::string stream = encode_frame("first") + encode_frame("") + encode_frame("third one");
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameDecoder decoder;
    std::vector<std::string> frames;
    std::string payload;
    decoder.feed(stream.data(), cut);
    while (decoder.next(payload) == FrameDecoder::Status::Frame) frames.push_back(payload);
    decoder.feed(stream.data() + cut, stream.size() - cut);
    while (decoder.next(payload) == FrameDecoder::Status::Frame) frames.push_back(payload);
    CHECK(frames == std::vector<std::string>{"first", "", "third one"});
    CHECK(decoder.buffered() == 0);
  }
}

TEST_CASE("one byte at a time", "[unit][proto]") {
  std::string stream = encode_frame("{\"type\":\"join\"}");
  FrameDecoder decoder;
  std::string payload;
  for (size_t i = 0; i + 1 < stream.size(); ++i) {
    decoder.feed(&stream[i], 1);
    CHECK(decoder.next(payload) == FrameDecoder::Status::NeedMore);
  }
  decoder.feed(&stream.back(), 1);
  CHECK(decoder.next(payload) == FrameDecoder::Status::Frame);
  CHECK(payload == "{\"type\":\"join\"}");
}

TEST_CASE("a decoder's frame limit can be lowered and raised", "[unit][proto]") {
  std::string frame = encode_frame(std::string(100 << 10, 'x'));
  std::string payload;
  FrameDecoder first(kMaxFirstFrameBytes);
  first.feed(frame.data(), frame.size());
  CHECK(first.next(payload) == FrameDecoder::Status::Error);
  FrameDecoder raised(kMaxFirstFrameBytes);
  raised.set_max_frame_bytes(kMaxFrameBytes);
  raised.feed(frame.data(), frame.size());
  CHECK(raised.next(payload) == FrameDecoder::Status::Frame);
  CHECK(payload.size() == (100 << 10));
}

TEST_CASE("an oversized length is an error before any allocation", "[unit][proto]") {
  FrameDecoder decoder;
  std::string payload;
  decoder.feed("\xff\xff\xff\xff", 4);
  CHECK(decoder.next(payload) == FrameDecoder::Status::Error);
  FrameDecoder exact;
  std::string limit = encode_frame(std::string(kMaxFrameBytes + 1, 'x')).substr(0, 4);
  exact.feed(limit.data(), 4);
  CHECK(exact.next(payload) == FrameDecoder::Status::Error);
}

TEST_CASE("every message survives a round trip", "[unit][proto]") {
  Hello hello;
  hello.run_id = "job";
  hello.node_id = "n1";
  hello.address = "127.0.0.2";
  hello.local_world_size = 4;
  hello.rank_hint = 2;
  hello.config = {2, 3, 5, 1000, 60000, 5000};
  RoundAssigned round{3, 1, 2, 4, 8, "10.0.0.1", 29500};
  WorkerFailed failed{3, 5, 1, 139, "signal 11 (SIGSEGV)", "node-b", "summary\ntext"};
  Waiting waiting{2, 3, 4, int64_t{1500}};
  std::vector<ControlMessage> messages{hello,
                                       Join{},
                                       Heartbeat{},
                                       failed,
                                       NodeSucceeded{3},
                                       Leave{"bye"},
                                       StatusRequest{},
                                       Welcome{},
                                       waiting,
                                       round,
                                       Restart{"why"},
                                       Stop{7, "r", "s"},
                                       Complete{},
                                       HeartbeatAck{},
                                       Error{"no"},
                                       StatusReply{29400, {}}};
  for (const auto& message : messages) {
    std::string error;
    auto decoded = decode_message(encode_message(message), error);
    INFO(message_type(message) << ": " << error);
    REQUIRE(decoded);
    CHECK(decoded->index() == message.index());
  }
  std::string error;
  auto back = decode_message(encode_message(hello), error);
  const Hello& h = std::get<Hello>(*back);
  CHECK(h.rank_hint == 2);
  CHECK(h.config.max_restarts == 5);
  CHECK(h.config.heartbeat_timeout_ms == 5000);
  auto r = std::get<RoundAssigned>(*decode_message(encode_message(round), error));
  CHECK(r.master_addr == "10.0.0.1");
  CHECK(r.base_rank == 4);
  auto f = std::get<WorkerFailed>(*decode_message(encode_message(failed), error));
  CHECK(f.summary == "summary\ntext");
  CHECK(f.exit_status == 139);
  CHECK(f.cause.empty());  // an older agent's report has none
  // An answer's proof and a request's nonce travel; an empty proof is left out of the text.
  StatusReply proven{29400, {}, "proof-hex"};
  CHECK(std::get<StatusReply>(*decode_message(encode_message(proven), error)).proof == "proof-hex");
  CHECK(encode_message(StatusReply{29400, {}}).find("proof") == std::string::npos);
  CHECK(std::get<StopRunReply>(
            *decode_message(encode_message(StopRunReply{"j", true, 2, "p"}), error))
            .proof == "p");
  CHECK(std::get<EventsReply>(*decode_message(encode_message(EventsReply{"j", {}, 0, "p"}), error))
            .proof == "p");
  CHECK(std::get<StatusRequest>(*decode_message(encode_message(StatusRequest{"", "", "n"}), error))
            .client_nonce == "n");
  CHECK_FALSE(decode_message(
      encode_message(StatusRequest{"", "", std::string(kMaxClientNonceBytes + 1, 'n')}), error));
  CHECK(error.find("client_nonce") != std::string::npos);
  // An agent's brief question and its answer's count; a request of an older tool is not brief,
  // and a full reply leaves the count out.
  auto brief = std::get<StatusRequest>(
      *decode_message(encode_message(StatusRequest{"j", "", "", true, "me:1#"}), error));
  CHECK(brief.brief);
  CHECK(brief.own_node_prefix == "me:1#");
  CHECK_FALSE(
      std::get<StatusRequest>(*decode_message(R"({"type":"status","run_id":"j"})", error)).brief);
  CHECK_FALSE(decode_message(
      encode_message(StatusRequest{"j", "", "", true, std::string(kMaxNodeIdBytes + 1, 'p')}),
      error));
  CHECK(error.find("own_node_prefix") != std::string::npos);
  StatusRun counted{"j", "running", 1, 0, 0, 2, 3, 0, {}};
  counted.live_nodes = 2;
  CHECK(std::get<StatusReply>(*decode_message(encode_message(StatusReply{1, {counted}}), error))
            .runs[0]
            .live_nodes == 2);
  counted.live_nodes = -1;
  CHECK(encode_message(StatusReply{1, {counted}}).find("live_nodes") == std::string::npos);
  CHECK(std::get<StatusReply>(*decode_message(encode_message(StatusReply{1, {counted}}), error))
            .runs[0]
            .live_nodes == -1);
  failed.cause = "signal 11 (SIGSEGV): Segmentation fault";
  CHECK(std::get<WorkerFailed>(*decode_message(encode_message(failed), error)).cause ==
        failed.cause);
  failed.cause = std::string(kMaxFailureCauseBytes + 1, 'c');
  CHECK_FALSE(decode_message(encode_message(failed), error));
  failed.cause.clear();
  // The texts that become a run's restart and stop reasons are bounded too.
  failed.description = std::string(kMaxFailureTextBytes, 'd');
  CHECK(decode_message(encode_message(failed), error));
  failed.description += "d";
  CHECK_FALSE(decode_message(encode_message(failed), error));
  CHECK(error.find("description") != std::string::npos);
  failed.description = "exit code 1";
  failed.final_reason = std::string(kMaxFailureTextBytes + 1, 'f');
  CHECK_FALSE(decode_message(encode_message(failed), error));
  CHECK(decode_message(encode_message(Leave{std::string(kMaxFailureTextBytes, 'l')}), error));
  CHECK_FALSE(
      decode_message(encode_message(Leave{std::string(kMaxFailureTextBytes + 1, 'l')}), error));
  auto w =
      std::get<Waiting>(*decode_message(encode_message(Waiting{1, 2, 2, std::nullopt}), error));
  CHECK_FALSE(w.last_call_in_ms);
}

TEST_CASE("a hello carries its last round's size and an unanswered outcome", "[unit][proto]") {
  Hello hello;
  hello.run_id = "job";
  hello.node_id = "n";
  hello.last_round = 3;
  hello.last_round_nodes = 2;
  hello.outcome = CarriedOutcome{3, WorkerFailed{3, 1, 0, 7, "exit code 7", "h", "S"}};
  std::string error;
  auto back = decode_message(encode_message(hello), error);
  REQUIRE(back);
  const Hello& h = std::get<Hello>(*back);
  CHECK(h.last_round_nodes == 2);
  REQUIRE(h.outcome);
  REQUIRE(h.outcome->failure);
  CHECK(h.outcome->failure->exit_status == 7);
  hello.outcome = CarriedOutcome{3, std::nullopt};
  CHECK_FALSE(std::get<Hello>(*decode_message(encode_message(hello), error)).outcome->failure);
  hello.outcome = CarriedOutcome{4, std::nullopt};  // a round after its last one
  CHECK_FALSE(decode_message(encode_message(hello), error));
  CHECK(error == "bad \"hello\" message: outcome.round out of range");
  hello.outcome = CarriedOutcome{3, WorkerFailed{2, 1, 0, 7, "", "", ""}};  // rounds disagree
  CHECK_FALSE(decode_message(encode_message(hello), error));
}

namespace {

// A hello with only what every hello needs (what an older agent sends of the newer fields).
Hello plain_hello() {
  Hello hello;
  hello.run_id = "job";
  hello.node_id = "n";
  return hello;
}

// The hello as the daemon reads it from its wire text.
Hello round_trip(const Hello& hello) {
  std::string error;
  auto back = decode_message(encode_message(hello), error);
  INFO(error);
  REQUIRE(back);
  return std::get<Hello>(*back);
}

}  // namespace

TEST_CASE("a hello says how long ago its agent started, absent from an older agent",
          "[unit][proto]") {
  Hello hello = plain_hello();
  CHECK(encode_message(hello).find("age_ms") == std::string::npos);
  CHECK(round_trip(hello).age_ms == -1);
  hello.age_ms = kMaxAgentAgeMs;
  CHECK(round_trip(hello).age_ms == kMaxAgentAgeMs);
}

TEST_CASE("a hello's fallbacks are said only when given, absent from an older agent, bounded",
          "[unit][proto]") {
  Hello hello = plain_hello();
  CHECK(encode_message(hello).find("fallbacks") == std::string::npos);
  CHECK(round_trip(hello).config.fallbacks.empty());
  hello.config.fallbacks = "node2:29400,[::1]:7";
  CHECK(round_trip(hello).config.fallbacks == "node2:29400,[::1]:7");
  std::string error;
  hello.config.fallbacks = std::string(kMaxFallbackListBytes + 1, 'a');
  CHECK_FALSE(decode_message(encode_message(hello), error));
  CHECK(error.find("config.fallbacks") != std::string::npos);
}

TEST_CASE("a welcome says whether its daemon lives in an agent, absent from an older daemon",
          "[unit][proto]") {
  std::string error;
  auto older = decode_message(R"({"type":"welcome","version":3,"proof":""})", error);
  INFO(error);
  REQUIRE(older);
  CHECK_FALSE(std::get<Welcome>(*older).agent_hosted);
  auto back = decode_message(encode_message(Welcome{kControlVersion, "p", true}), error);
  REQUIRE(back);
  CHECK(std::get<Welcome>(*back).agent_hosted);
  CHECK(std::get<Welcome>(*back).proof == "p");
}

TEST_CASE("a hello says whether its agent hosts the daemon and lost it, absent when not",
          "[unit][proto]") {
  Hello hello = plain_hello();
  std::string unsaid = encode_message(hello);
  CHECK(unsaid.find("hosts_rendezvous") == std::string::npos);
  CHECK(unsaid.find("last_round_host_lost") == std::string::npos);
  CHECK_FALSE(round_trip(hello).hosts_rendezvous);
  hello.hosts_rendezvous = true;
  hello.last_round_host_lost = true;
  CHECK(round_trip(hello).hosts_rendezvous);
  CHECK(round_trip(hello).last_round_host_lost);
  std::string error;
  // A stranger's wrong types are a malformed frame, not a crash or a true.
  for (const char* field : {"hosts_rendezvous", "last_round_host_lost"}) {
    nlohmann::json wrong = nlohmann::json::parse(encode_message(plain_hello()));
    wrong[field] = "yes";
    CHECK_FALSE(decode_message(wrong.dump(), error));
    wrong[field] = nlohmann::json::array({true});
    CHECK_FALSE(decode_message(wrong.dump(), error));
  }
  // A round assignment says whether the daemon's host is a member; an older daemon's does not.
  RoundAssigned round{1, 0, 2, 0, 4, "10.0.0.1", 29500, 0, 3, true};
  auto assigned = decode_message(encode_message(round), error);
  REQUIRE(assigned);
  CHECK(std::get<RoundAssigned>(*assigned).host_member);
  round.host_member = false;
  std::string older = encode_message(round);
  CHECK(older.find("host_member") == std::string::npos);
  CHECK_FALSE(std::get<RoundAssigned>(*decode_message(older, error)).host_member);
  nlohmann::json wrong = nlohmann::json::parse(older);
  wrong["host_member"] = 1;
  CHECK_FALSE(decode_message(wrong.dump(), error));
}

TEST_CASE("a hello names where its last round ran only after a move and within a bound",
          "[unit][proto]") {
  Hello hello = plain_hello();
  CHECK(encode_message(hello).find("last_round_at") == std::string::npos);
  CHECK(round_trip(hello).last_round_at.empty());
  hello.last_round_at = "[fd00::1]:29400";
  CHECK(round_trip(hello).last_round_at == "[fd00::1]:29400");
  std::string error;
  hello.last_round_at = std::string(kMaxEndpointBytes, 'h');
  CHECK(decode_message(encode_message(hello), error));
  hello.last_round_at += 'h';
  CHECK_FALSE(decode_message(encode_message(hello), error));
  CHECK(error.find("last_round_at is 273 bytes, over 272") != std::string::npos);
  nlohmann::json wrong = nlohmann::json::parse(encode_message(plain_hello()));
  wrong["last_round_at"] = 7;
  CHECK_FALSE(decode_message(wrong.dump(), error));
}

TEST_CASE("a leave says where the node goes, and a status where runs went, only when said",
          "[unit][proto]") {
  std::string error;
  std::string plain = encode_message(Leave{"bye"});
  CHECK(plain.find("moved_to") == std::string::npos);
  CHECK(std::get<Leave>(*decode_message(plain, error)).moved_to.empty());
  CHECK(std::get<Leave>(*decode_message(encode_message(Leave{"bye", "node2:29400"}), error))
            .moved_to == "node2:29400");
  CHECK_FALSE(
      decode_message(encode_message(Leave{"bye", std::string(kMaxEndpointBytes + 1, 'h')}), error));
  CHECK(error.find("moved_to") != std::string::npos);
  StatusReply reply{1, {}};
  CHECK(encode_message(reply).find("moved_runs") == std::string::npos);
  reply.moved_runs.push_back({"job", "node2:29400"});
  StatusReply back = std::get<StatusReply>(*decode_message(encode_message(reply), error));
  REQUIRE(back.moved_runs.size() == 1);
  CHECK(back.moved_runs[0].run_id == "job");
  CHECK(back.moved_runs[0].to == "node2:29400");
  nlohmann::json wrong = nlohmann::json::parse(encode_message(reply));
  wrong["moved_runs"][0]["to"] = 5;
  CHECK_FALSE(decode_message(wrong.dump(), error));
}

TEST_CASE("a status run says after which round it was taken over and from where", "[unit][proto]") {
  std::string error;
  StatusRun run{"j", "running", 4, 0, 0, 2, 3, 0, {}};
  std::string began_here = encode_message(StatusReply{1, {run}});
  CHECK(began_here.find("resumed_after") == std::string::npos);
  CHECK(began_here.find("moved_from") == std::string::npos);
  CHECK(std::get<StatusReply>(*decode_message(began_here, error)).runs[0].resumed_after == -1);
  run.resumed_after = 3;
  run.moved_from = "gpu-1:29400";
  StatusRun back =
      std::get<StatusReply>(*decode_message(encode_message(StatusReply{1, {run}}), error)).runs[0];
  CHECK(back.resumed_after == 3);
  CHECK(back.moved_from == "gpu-1:29400");
  nlohmann::json bad = nlohmann::json::parse(encode_message(StatusReply{1, {run}}));
  bad["runs"][0]["resumed_after"] = -2;  // a daemon's bad number is refused, not shown
  CHECK_FALSE(decode_message(bad.dump(), error));
  CHECK(error.find("resumed_after") != std::string::npos);
}

TEST_CASE("malformed payloads are errors, not crashes", "[unit][proto]") {
  std::string error;
  CHECK_FALSE(decode_message("not json", error));
  CHECK(error == "frame is not a JSON object");
  CHECK_FALSE(decode_message("[1,2]", error));
  CHECK_FALSE(decode_message("{}", error));
  CHECK(error == "frame has no \"type\"");
  CHECK_FALSE(decode_message("{\"type\":\"launch-missiles\"}", error));
  CHECK(error.find("unknown message type") != std::string::npos);
  CHECK_FALSE(decode_message("{\"type\":\"round\",\"round\":\"three\"}", error));
  CHECK(error.find("bad \"round\" message") != std::string::npos);
  CHECK_FALSE(decode_message("{\"type\":\"hello\"}", error));
}

namespace {

// A valid hello's JSON with one field (at `pointer`) replaced by `value`.
std::string hello_with(const std::string& pointer, const std::string& value) {
  Hello hello;
  hello.run_id = "job";
  hello.node_id = "n1";
  hello.address = "127.0.0.2";
  hello.rank_hint = 0;
  hello.config = {1, 2, 3, 1000, 60000, 5000};
  hello.age_ms = 1500;
  std::string text = encode_message(hello);
  std::string key = "\"" + pointer + "\":";
  size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  size_t start = at + key.size();
  size_t end = text.find_first_of(",}", start);
  return text.substr(0, start) + value + text.substr(end);
}

}  // namespace

TEST_CASE("numbers the daemon computes with are bounded", "[unit][proto]") {
  std::string error;
  REQUIRE(decode_message(hello_with("local_world_size", "8"), error));
  CHECK(decode_message(hello_with("join_timeout_ms", "31536000000"), error));
  // Not integers, or not 32-bit ones: nlohmann would cast 1e300 (undefined) or wrap 2^32 + 1.
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"local_world_size", "1e300"},
                                                        {"local_world_size", "1.5"},
                                                        {"local_world_size", "4294967297"},
                                                        {"last_round", "-4294967296"},
                                                        {"join_timeout_ms", "1e300"},
                                                        {"join_timeout_ms", "18446744073709551615"},
                                                        // Out of the protocol's bounds.
                                                        {"local_world_size", "0"},
                                                        {"local_world_size", "16385"},
                                                        {"last_round", "2147483647"},
                                                        {"restarts_used", "-1"},
                                                        {"rank_hint", "-3"},
                                                        {"rank0_port", "70000"},
                                                        {"min_nodes", "0"},
                                                        {"max_nodes", "100001"},
                                                        {"max_restarts", "-1"},
                                                        {"heartbeat_timeout_ms", "-5"},
                                                        {"last_call_ms", "31536000001"},
                                                        {"host_failure_limit", "-1"},
                                                        {"host_failure_limit", "2147483647"},
                                                        {"host_cooldown_ms", "-1"},
                                                        {"host_cooldown_ms", "31536000001"},
                                                        {"age_ms", "-2"},
                                                        {"age_ms", "315360000001"},
                                                        {"age_ms", "\"old\""}}) {
    INFO(field << " = " << value);
    error.clear();
    CHECK_FALSE(decode_message(hello_with(field, value), error));
    CHECK(error.find("bad \"hello\" message: ") == 0);
  }
  CHECK_FALSE(decode_message(R"({"type":"hello_x"})", error));
  CHECK_FALSE(decode_message(R"({"type":"node_succeeded","round":-1})", error));
  CHECK(error == "bad \"node_succeeded\" message: round out of range");
  CHECK_FALSE(decode_message(
      R"({"type":"worker_failed","round":0,"rank":-1,"local_rank":0,"exit_status":1,)"
      R"("description":"","host":"","summary":""})",
      error));
  CHECK_FALSE(decode_message(R"({"type":"join","rank0_port":1e9})", error));
}

TEST_CASE("a round assignment, a stop and a failure summary are bounded", "[unit][proto]") {
  RoundAssigned good{3, 1, 2, 8, 16, "node-a.cluster", 29500, 1, 3};
  std::string error;
  REQUIRE(decode_message(encode_message(good), error));
  struct Case {
    const char* field;
    std::function<void(RoundAssigned&)> make;
  };
  for (const Case& c : std::vector<Case>{
           {"round", [](RoundAssigned& r) { r.round = -3; }},
           {"group_world_size", [](RoundAssigned& r) { r.group_world_size = 0; }},
           {"group_rank", [](RoundAssigned& r) { r.group_rank = 2; }},
           {"group_rank", [](RoundAssigned& r) { r.group_rank = -7; }},
           {"world_size", [](RoundAssigned& r) { r.world_size = 0; }},
           {"base_rank", [](RoundAssigned& r) { r.base_rank = -5; }},
           {"base_rank", [](RoundAssigned& r) { r.base_rank = 16; }},
           {"master_port", [](RoundAssigned& r) { r.master_port = 70000; }},
           {"master_port", [](RoundAssigned& r) { r.master_port = -1; }},
           {"restarts_used", [](RoundAssigned& r) { r.restarts_used = -1; }},
           {"max_restarts", [](RoundAssigned& r) { r.max_restarts = -1; }},
           {"master_addr", [](RoundAssigned& r) { r.master_addr = "evil\ncohort error: forged"; }},
           {"master_addr", [](RoundAssigned& r) { r.master_addr = "a b"; }},
           {"master_addr", [](RoundAssigned& r) { r.master_addr = "x\x1b[2J"; }},
           {"master_addr", [](RoundAssigned& r) { r.master_addr = std::string(256, 'a'); }}}) {
    RoundAssigned round = good;
    c.make(round);
    INFO(c.field);
    error.clear();
    CHECK_FALSE(decode_message(encode_message(round), error));
    CHECK(error == std::string("bad \"round\" message: ") + c.field + " out of range");
  }
  for (int status : {-1, 256, -2147483647}) {
    INFO(status);
    CHECK_FALSE(decode_message(encode_message(Stop{status, "r", ""}), error));
  }
  CHECK(decode_message(encode_message(Stop{0, "r", ""}), error));
  WorkerFailed failed{0, 0, 0, 1, "exit code 1", "h", std::string(kMaxFailureSummaryBytes, 's')};
  CHECK(decode_message(encode_message(failed), error));
  failed.summary += "s";
  CHECK_FALSE(decode_message(encode_message(failed), error));
  CHECK(error == "bad \"worker_failed\" message: summary out of range");
}

TEST_CASE("text that is not UTF-8 is encoded with replacement characters", "[unit][proto]") {
  Stop stop{4, "worker failed", "stderr: caf\xe9 \xff\xfe end"};
  std::string error;
  auto decoded = decode_message(encode_message(stop), error);
  REQUIRE(decoded);
  CHECK(std::get<Stop>(*decoded).summary == "stderr: caf\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD end");
}

TEST_CASE("nesting past the depth limit is refused before parsing, at any depth", "[unit][proto]") {
  std::string error;
  // 20,000 levels used to overflow the stack in the recursive number check.
  for (int depth : {kMaxJsonDepth, 20000, 2000000}) {
    INFO("depth " << depth);
    std::string deep = R"({"type":"join","rank0_port":0,"x":)" + std::string(depth, '[') +
                       std::string(depth, ']') + "}";
    CHECK_FALSE(decode_message(deep, error));
    CHECK(error == "frame is not a JSON object");
    std::string objects = R"({"type":"join","rank0_port":0,"x":)";
    for (int i = 0; i < std::min(depth, 100000); ++i) objects += R"({"k":)";
    CHECK_FALSE(
        decode_message(objects + "1" + std::string(std::min(depth, 100000) + 1, '}'), error));
  }
  // Up to the limit (the root object is level 1) an unknown field is ignored as before.
  int inner = kMaxJsonDepth - 1;
  auto shallow = decode_message(R"({"type":"join","rank0_port":0,"x":)" + std::string(inner, '[') +
                                    std::string(inner, ']') + "}",
                                error);
  CHECK(shallow);
  CHECK(parse_untrusted_json(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'))
            .is_array());
  CHECK(parse_untrusted_json(std::string(kMaxJsonDepth + 1, '[') +
                             std::string(kMaxJsonDepth + 1, ']'))
            .is_discarded());
  CHECK(parse_untrusted_json("[[[").is_discarded());
  // Brackets in strings, escaped quotes among them, are text, not nesting.
  std::string brackets = std::string(kMaxJsonDepth + 1, '[') + R"(\\\"{{)";
  nlohmann::json in_strings = parse_untrusted_json(R"({"a":")" + brackets + R"(","b":"\\"})");
  REQUIRE(in_strings.is_object());
  CHECK(in_strings["a"] == std::string(kMaxJsonDepth + 1, '[') + R"(\"{{)");
  CHECK(in_strings["b"] == "\\");
  CHECK(parse_untrusted_json(R"(["\\",)" + std::string(kMaxJsonDepth, '[') +
                             std::string(kMaxJsonDepth, ']') + "]")
            .is_discarded());
}

// Found by the fuzzer: 64 KB of empty objects in one array took 23 s to decode under ASan, as
// the depth limit ran in the parser's callback. The limit now costs one pass over the text.
TEST_CASE("a frame of 20,000 empty objects decodes like any unknown value", "[unit][proto]") {
  std::string objects = R"({"type":"restart","reason":"","x":[{})";
  for (int i = 1; i < 20000; ++i) objects += ",{}";
  std::string error;
  std::optional<ControlMessage> message = decode_message(objects + "]}", error);
  REQUIRE(message);
  CHECK(std::holds_alternative<Restart>(*message));
}

// 64 MiB of `{},` in a status reply (a hostile endpoint's) took 2.7 GB to parse.
TEST_CASE("a document of more values than any reply holds is refused before parsing",
          "[unit][proto]") {
  auto many = [](size_t values, const std::string& unit) {
    std::string text = "[" + unit;
    for (size_t i = 2; i < values; ++i) text += "," + unit;
    return text + "]";
  };
  CHECK(parse_untrusted_json(many(kMaxJsonValues, "0")).is_array());
  CHECK(parse_untrusted_json(many(kMaxJsonValues + 1, "0")).is_discarded());
  CHECK(parse_untrusted_json(many(kMaxJsonValues / 2 + 1, "{}")).is_discarded());
  CHECK(parse_untrusted_json(many(kMaxJsonValues / 2 - 1, "[]")).is_array());
  // Commas and brackets in strings are text.
  CHECK(parse_untrusted_json("[\"" + std::string(kMaxJsonValues, ',') + "\"]").is_array());
  std::string error;
  std::string reply = R"({"port":1,"runs":[],"x":)" + many(kMaxJsonValues, "{}") + "}";
  CHECK_FALSE(decode_status_document(reply, error));
  CHECK(error == "status is not a JSON object");
}

namespace {

// A daemon with one running run of two nodes, one of them done, and one forming run.
StatusReply two_runs() {
  StatusRun running{"job", "running", 2, 1, 3, 2, 4, 41817, {}};
  running.nodes.push_back({"10.0.0.2:42:7#0", "10.0.0.2", "member", 0, 2, true});
  running.nodes.push_back({"10.0.0.3:43:8#1", "10.0.0.3", "member", 1, 4, false});
  StatusRun forming{"next", "forming", -1, 0, 0, 2, 2, 0, {}};
  forming.nodes.push_back({"10.0.0.4:44:9#0", "10.0.0.4", "joining", -1, 1, false});
  return StatusReply{29400, {running, forming}};
}

}  // namespace

TEST_CASE("the status document has the keys cohort status --json always printed", "[unit][proto]") {
  StatusReply status = two_runs();
  CHECK(encode_status_document(StatusReply{29400, {}}) == R"({"port":29400,"runs":[]})");
  // Since the straggler report: median_step_ms and slowest; since status --watch,
  // heartbeat_age_ms and last_failure; beside the old keys.
  CHECK(encode_status_document(status) ==
        R"({"port":29400,"runs":[{"last_failure":"","max_nodes":4,"max_restarts":3,)"
        R"("median_step_ms":0,"min_nodes":2,"nodes":[)"
        R"({"address":"10.0.0.2","group_rank":0,"heartbeat_age_ms":0,"local_world_size":2,)"
        R"("node_id":"10.0.0.2:42:7#0","state":"member","succeeded":true},)"
        R"({"address":"10.0.0.3","group_rank":1,"heartbeat_age_ms":0,"local_world_size":4,)"
        R"("node_id":"10.0.0.3:43:8#1","state":"member","succeeded":false}],)"
        R"("phase":"running","restarts_used":1,"round":2,"run_id":"job","slowest":[],)"
        R"("store_port":41817},)"
        R"({"last_failure":"","max_nodes":2,"max_restarts":0,"median_step_ms":0,"min_nodes":2,)"
        R"("nodes":[)"
        R"({"address":"10.0.0.4","group_rank":-1,"heartbeat_age_ms":0,"local_world_size":1,)"
        R"("node_id":"10.0.0.4:44:9#0","state":"joining","succeeded":false}],)"
        R"("phase":"forming","restarts_used":0,"round":-1,"run_id":"next","slowest":[],)"
        R"("store_port":0}]})");
  std::string error;
  auto back = decode_status_document(encode_status_document(status), error);
  INFO(error);
  REQUIRE(back);
  CHECK(encode_status_document(*back) == encode_status_document(status));
  auto reply = decode_message(encode_message(status), error);
  REQUIRE(reply);
  const StatusReply& typed = std::get<StatusReply>(*reply);
  REQUIRE(typed.runs.size() == 2);
  CHECK(typed.runs[0].store_port == 41817);
  CHECK(typed.runs[0].nodes[1].local_world_size == 4);
  CHECK(typed.runs[1].nodes[0].group_rank == -1);
}

TEST_CASE("a status reply with a missing or mistyped field is refused", "[unit][proto]") {
  std::string good = encode_message(two_runs());
  auto with = [&](const std::string& from, const std::string& to) {
    size_t at = good.find(from);
    REQUIRE(at != std::string::npos);
    return std::string(good).replace(at, from.size(), to);
  };
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("run_id":"job")", R"("run_id":5)"},
           {R"("group_rank":0)", R"("group_rank":"0")"},
           {R"("succeeded":true)", R"("succeeded":1)"},
           {R"("round":2)", R"("round":2.5)"},
           {R"("store_port":41817)", R"("store_port":70000)"},
           {R"("port":29400)", R"("port":-1)"},
           {R"("nodes":[)", R"("nodes":"none","x":[)"},
           {R"("phase":"running",)", ""}}) {
    INFO(from << " -> " << to);
    std::string error;
    CHECK_FALSE(decode_message(with(from, to), error));
    CHECK(error.find("bad \"status_reply\" message: ") == 0);
  }
  std::string error;
  CHECK_FALSE(decode_status_document("[]", error));
  CHECK(error == "status is not a JSON object");
  CHECK_FALSE(decode_status_document(R"({"port":1})", error));
  CHECK(error.find("bad \"status_reply\" message: ") == 0);
}

TEST_CASE("a progress report survives a round trip and is bounded", "[unit][proto][hang]") {
  Progress progress{4, true, 2000, 150, "node-b", {}};
  progress.ranks.push_back({0, 120, 7, 95});
  progress.ranks.push_back({1, 2100, std::nullopt, std::nullopt});
  std::string error;
  auto decoded = decode_message(encode_message(progress), error);
  INFO(error);
  REQUIRE(decoded);
  const Progress& back = std::get<Progress>(*decoded);
  CHECK(back.round == 4);
  CHECK(back.hang);
  CHECK(back.host == "node-b");
  REQUIRE(back.ranks.size() == 2);
  CHECK(back.ranks[0].step == 7);
  CHECK(back.ranks[0].step_ms == 95);
  CHECK_FALSE(back.ranks[1].step);
  CHECK(back.ranks[1].silent_ms == 2100);
  // A report with `ranks` (JSON) and one top-level member replaced by `member`.
  auto report = [](const std::string& ranks, const std::string& member = R"("round":1)") {
    std::string text = R"({"type":"progress","round":1,"hang":false,"hang_timeout_ms":0,)"
                       R"("straggler_factor_pct":150,"host":"h","ranks":)" +
                       ranks + "}";
    std::string key = member.substr(0, member.find(':') + 1);
    size_t at = text.find(key);
    size_t end = text.find_first_of(",}", at + key.size());
    return text.replace(at, end - at, member);
  };
  auto rank = [](const std::string& members) { return "[{" + members + "}]"; };
  CHECK(
      decode_message(report(rank(R"("local_rank":3,"silent_ms":5,"step":2,"step_ms":9)")), error));
  for (const std::string& bad :
       {report("[]", R"("round":-1)"), report("[]", R"("hang_timeout_ms":-1)"),
        report("[]", R"("straggler_factor_pct":100)"),
        report("[]", "\"host\":\"" + std::string(256, 'h') + "\""),
        report(rank(R"("local_rank":0,"silent_ms":-5)")),
        report(rank(R"("local_rank":0,"silent_ms":1,"step":-1)")),
        report(rank(R"("local_rank":0,"silent_ms":1,"step_ms":31536000001)")),
        report(rank(R"("local_rank":16384,"silent_ms":1)"))}) {
    INFO(bad);
    error.clear();
    CHECK_FALSE(decode_message(bad, error));
    CHECK(error.find("bad \"progress\" message: ") == 0);
  }
}

TEST_CASE("events and stop_run requests and replies survive a round trip and are bounded",
          "[unit][proto][events]") {
  std::string error;
  EventsReply events{"job", {"{\"event\":\"run.created\"}", "{\"event\":\"x\"}"}, 7};
  auto reply = std::get<EventsReply>(*decode_message(encode_message(events), error));
  CHECK(reply.events == events.events);
  CHECK(reply.dropped == 7);
  auto stop =
      decode_message(encode_message(StopRunRequest{"job", "maintenance", "p", "alice@h"}), error);
  REQUIRE(stop);
  CHECK(std::get<StopRunRequest>(*stop).reason == "maintenance");
  CHECK(std::get<StopRunRequest>(*stop).by == "alice@h");
  auto told = decode_message(encode_message(Stop{130, "maintenance", "", "alice@h"}), error);
  REQUIRE(told);
  CHECK(std::get<Stop>(*told).stopped_by == "alice@h");
  // Older peers send neither field.
  CHECK(std::get<Stop>(
            *decode_message(R"({"type":"stop","exit_status":1,"reason":"r","summary":""})", error))
            .stopped_by.empty());
  CHECK_FALSE(
      decode_message(encode_message(StopRunRequest{"job", "", "", std::string(300, 'u')}), error));
  CHECK(std::get<StopRunReply>(*decode_message(encode_message(StopRunReply{"job", true, 3}), error))
            .nodes == 3);
  CHECK(std::holds_alternative<EventsRequest>(
      *decode_message(encode_message(EventsRequest{"job", ""}), error)));
  CHECK_FALSE(
      decode_message(encode_message(StopRunRequest{"job", std::string(2000, 'r'), ""}), error));
  CHECK(error.find("reason out of range") != std::string::npos);
  CHECK_FALSE(
      decode_message(R"({"type":"events_reply","run_id":"j","events":[],"dropped":-1})", error));
}

TEST_CASE("hang_declared dump_request and collectives survive a round trip and are bounded",
          "[unit][proto][hang]") {
  std::string error;
  auto declared = decode_message(encode_message(HangDeclared{3, 8000}), error);
  REQUIRE(declared);
  CHECK(std::get<HangDeclared>(*declared).dump_timeout_ms == 8000);
  auto request = decode_message(encode_message(DumpRequest{3}), error);
  REQUIRE(request);
  CHECK(std::get<DumpRequest>(*request).round == 3);

  CollectiveCall waiting{120, "all_reduce", {{1048576}}, {"Float"}, "scheduled"};
  GroupProgress group{"0", "default_pg", 4, 120, -1, 119, waiting, waiting};
  RankCollectivesReport rank;
  rank.rank = 5;
  rank.collectives.version = "2.10";
  rank.collectives.groups = {group};
  RankCollectivesReport missing;
  missing.rank = 6;
  missing.error = "no dump within 8 s";
  Collectives report{3, "node-b", {rank, missing}};
  auto decoded = decode_message(encode_message(report), error);
  INFO(error);
  REQUIRE(decoded);
  const Collectives& back = std::get<Collectives>(*decoded);
  CHECK(back.host == "node-b");
  REQUIRE(back.ranks.size() == 2);
  const GroupProgress& got = back.ranks[0].collectives.groups.at(0);
  CHECK(got.desc == "default_pg");
  CHECK(got.last_enqueued == 120);
  CHECK(got.last_completed == 119);
  REQUIRE(got.first_incomplete);
  CHECK(got.first_incomplete->shape_text() == "[[1048576]] Float");
  CHECK(back.ranks[0].collectives.version == "2.10");
  CHECK(back.ranks[1].error == "no dump within 8 s");
  CHECK(back.ranks[1].collectives.groups.empty());

  // Past the bounds: too many groups for one rank, long strings, long lists, a negative rank.
  auto refused = [&](Collectives bad) {
    error.clear();
    bool decodes = decode_message(encode_message(bad), error).has_value();
    INFO(error);
    return !decodes && error.find("bad \"collectives\" message: ") == 0;
  };
  Collectives many = report;
  many.ranks[0].collectives.groups.assign(kMaxSentProcessGroups + 1, group);
  CHECK(refused(many));
  Collectives long_op = report;
  long_op.ranks[0].collectives.groups[0].first_incomplete->op = std::string(129, 'x');
  CHECK(refused(long_op));
  Collectives long_sizes = report;
  long_sizes.ranks[0].collectives.groups[0].last_call->input_sizes.assign(17, {1});
  CHECK(refused(long_sizes));
  Collectives negative = report;
  negative.ranks[0].rank = -1;
  CHECK(refused(negative));
  Collectives long_host = report;
  long_host.host = std::string(256, 'h');
  CHECK(refused(long_host));
  CHECK_FALSE(decode_message(R"({"type":"hang_declared","round":1,"dump_timeout_ms":-1})", error));
}
