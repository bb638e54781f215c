#include "launcher/cli/control_request.hpp"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>

#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "proto/auth.hpp"
#include "proto/control_frame.hpp"

namespace cohort {
namespace {

using SteadyPoint = std::chrono::steady_clock::time_point;

// The next message on a blocking socket; nullopt (with `problem` set) on a read error, a timeout
// (each read's, or `deadline` for the whole) or a malformed frame.
std::optional<proto::ControlMessage> read_message(boost::asio::ip::tcp::socket& socket,
                                                  proto::FrameDecoder& decoder,
                                                  SteadyPoint deadline, std::string& problem) {
  std::string payload;
  char buffer[4096];
  boost::system::error_code error;
  for (;;) {
    auto status = decoder.next(payload);
    if (status == proto::FrameDecoder::Status::Frame) break;
    if (status == proto::FrameDecoder::Status::Error) {
      problem = "a frame larger than the protocol's limit";
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      problem = "no whole answer within the timeout";
      return std::nullopt;
    }
    size_t got = socket.read_some(boost::asio::buffer(buffer), error);
    if (error) {
      problem = error.message();
      return std::nullopt;
    }
    decoder.feed(buffer, got);
  }
  return proto::decode_message(payload, problem);
}

}  // namespace

ControlAnswer control_request(
    const std::string& endpoint, int timeout_ms,
    const std::function<proto::ControlMessage(const std::string& challenge)>& make_request,
    uint32_t max_answer_bytes) {
  auto target = parse_host_port(endpoint, 29400);
  if (!target) {
    return {std::nullopt, kExitUsage,
            "--rdzv-endpoint: expected host[:port], got '" + endpoint + "'"};
  }
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  ip::tcp::socket socket(io);
  boost::system::error_code error;
  ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(target->host, std::to_string(target->port), error);
  if (!error) boost::asio::connect(socket, results, error);
  if (error) {
    return {std::nullopt, kExitRendezvous,
            "cannot reach " + target->host + ":" + std::to_string(target->port) + ": " +
                error.message()};
  }
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  proto::FrameDecoder decoder(proto::kMaxFirstFrameBytes);
  std::string problem;
  SteadyPoint deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::optional<proto::ControlMessage> message = read_message(socket, decoder, deadline, problem);
  auto* challenge = message ? std::get_if<proto::Challenge>(&*message) : nullptr;
  if (challenge == nullptr) {
    return {std::move(message), kExitRendezvous,
            "no challenge from " + endpoint + ": " + (problem.empty() ? "unexpected" : problem)};
  }
  decoder.set_max_frame_bytes(max_answer_bytes);
  std::string request = proto::encode_frame(proto::encode_message(make_request(challenge->nonce)));
  boost::asio::write(socket, boost::asio::buffer(request), error);
  if (error)
    return {std::nullopt, kExitRendezvous, "cannot send to " + endpoint + ": " + error.message()};
  message = read_message(socket, decoder, deadline, problem);
  if (!message)
    return {std::nullopt, kExitRendezvous, "no answer from " + endpoint + ": " + problem};
  return {std::move(message), kExitSuccess, ""};
}

AnswerCheck::AnswerCheck(std::string token, std::string kind, std::string run_id)
    : token_(std::move(token)), kind_(std::move(kind)), run_id_(std::move(run_id)) {
  if (!token_.empty()) nonce_ = proto::random_nonce();
}

const std::string& AnswerCheck::nonce_for(const std::string& challenge) {
  challenge_ = challenge;
  return nonce_;
}

std::string AnswerCheck::problem(const std::string& proof) const {
  if (token_.empty()) return {};
  if (proto::proofs_equal(proof, proto::answer_proof(token_, kind_, challenge_, nonce_, run_id_)))
    return {};
  return "the answer does not prove that the endpoint holds the token: it is not the daemon (or "
         "it is a cohortd older than this cohort)";
}

}  // namespace cohort
