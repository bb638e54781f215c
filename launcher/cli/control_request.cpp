#include "launcher/cli/control_request.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <chrono>

#include "common/exit_codes.hpp"
#include "common/fd_wait.hpp"
#include "common/host_port.hpp"
#include "proto/auth.hpp"
#include "proto/control_frame.hpp"

namespace cohort {
namespace {

using SteadyPoint = std::chrono::steady_clock::time_point;
namespace ip = boost::asio::ip;

// Connects the non-blocking `socket` to the first of `endpoints` that answers before `deadline`;
// the error of the last one tried otherwise.
boost::system::error_code connect_before(ip::tcp::socket& socket,
                                         const ip::tcp::resolver::results_type& endpoints,
                                         SteadyPoint deadline) {
  boost::system::error_code error = boost::asio::error::host_not_found;
  for (const auto& entry : endpoints) {
    socket.close(error);
    socket.open(entry.endpoint().protocol(), error);
    if (!error) socket.non_blocking(true, error);
    if (error) continue;
    const auto& address = entry.endpoint();
    if (::connect(socket.native_handle(), address.data(), address.size()) == 0) return {};
    if (errno != EINPROGRESS) {
      error.assign(errno, boost::system::system_category());
      continue;
    }
    if (wait_for_fd(socket.native_handle(), POLLOUT, deadline) != FdWait::Ready)
      return boost::asio::error::timed_out;
    int status = 0;
    socklen_t length = sizeof status;
    ::getsockopt(socket.native_handle(), SOL_SOCKET, SO_ERROR, &status, &length);
    if (status == 0) return {};
    error.assign(status, boost::system::system_category());
  }
  return error;
}

// Sends all of `bytes` on the non-blocking `socket` before `deadline`.
boost::system::error_code send_before(ip::tcp::socket& socket, const std::string& bytes,
                                      SteadyPoint deadline) {
  boost::system::error_code error;
  for (size_t sent = 0; sent < bytes.size();) {
    sent += socket.write_some(boost::asio::buffer(bytes.data() + sent, bytes.size() - sent), error);
    if (error == boost::asio::error::would_block) {
      if (wait_for_fd(socket.native_handle(), POLLOUT, deadline) != FdWait::Ready)
        return boost::asio::error::timed_out;
    } else if (error) {
      return error;
    }
  }
  return {};
}

// The next message on the non-blocking `socket`; nullopt (with `problem` set) on a read error,
// `deadline` passing (however often bytes arrive before it) or a malformed frame.
std::optional<proto::ControlMessage> read_message(ip::tcp::socket& socket,
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
    if (wait_for_fd(socket.native_handle(), POLLIN, deadline) != FdWait::Ready) {
      problem = "no whole answer within the timeout";
      return std::nullopt;
    }
    size_t got = socket.read_some(boost::asio::buffer(buffer), error);
    if (error == boost::asio::error::would_block) continue;
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
  if (!target || target->port == 0) {
    return {std::nullopt, kExitUsage,
            "--rdzv-endpoint: expected host[:port] (port 1-65535), got '" + endpoint + "'"};
  }
  boost::asio::io_context io;
  ip::tcp::socket socket(io);
  boost::system::error_code error;
  ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(target->host, std::to_string(target->port), error);
  // One deadline for the connect, the challenge and the answer (the name's lookup is the
  // resolver's, with its own timeouts).
  SteadyPoint deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!error) error = connect_before(socket, results, deadline);
  if (error) {
    return {std::nullopt, kExitRendezvous,
            "cannot reach " + host_port_text(target->host, target->port) + ": " + error.message()};
  }
  proto::FrameDecoder decoder(proto::kMaxFirstFrameBytes);
  std::string problem;
  std::optional<proto::ControlMessage> message = read_message(socket, decoder, deadline, problem);
  auto* challenge = message ? std::get_if<proto::Challenge>(&*message) : nullptr;
  if (challenge == nullptr) {
    return {std::move(message), kExitRendezvous,
            "no challenge from " + endpoint + ": " + (problem.empty() ? "unexpected" : problem)};
  }
  decoder.set_max_frame_bytes(max_answer_bytes);
  std::string request = proto::encode_frame(proto::encode_message(make_request(challenge->nonce)));
  error = send_before(socket, request, deadline);
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

std::string AnswerCheck::problem(const std::string& proof, const std::string& digest) const {
  if (token_.empty()) return {};
  if (proof.empty()) {
    return "the answer proves no token: the endpoint is a cohortd without one (then leave the "
           "token out: no --token-file, COHORT_TOKEN unset), or no cohortd";
  }
  std::string expected = proto::answer_proof(token_, kind_, challenge_, nonce_, run_id_, digest);
  if (proto::proofs_equal(proof, expected)) return {};
  return "the answer does not prove that the endpoint holds the token, or it was changed on the "
         "way: it is not the daemon (or it is a cohortd older than this cohort)";
}

}  // namespace cohort
