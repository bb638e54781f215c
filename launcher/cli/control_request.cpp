#include "launcher/cli/control_request.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <chrono>

#include "common/exit_codes.hpp"
#include "common/fd_wait.hpp"
#include "common/host_port.hpp"
#include "common/text.hpp"
#include "launcher/options/help_format.hpp"
#include "proto/auth.hpp"
#include "proto/control_frame.hpp"

namespace cohort {
namespace {

using SteadyPoint = std::chrono::steady_clock::time_point;
namespace ip = boost::asio::ip;

constexpr std::string_view kControlPortHint =
    "--rdzv-endpoint names cohortd's control port, its --port, 29400 by default";

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

// Reads frames from one connection and remembers the first bytes it sent, to say what answered
// when that is not a cohortd. One per control_request, on its caller's thread.
struct FrameReader {
  ip::tcp::socket& socket;
  proto::FrameDecoder decoder{proto::kMaxFirstFrameBytes};
  std::string first_bytes;  ///< up to kShownBytes of what came first
  int frames_read = 0;
  static constexpr size_t kShownBytes = 32;

  // The next message; nullopt (with `problem` set) on a read error, `deadline` passing (however
  // often bytes arrive before it) or a malformed frame. Nothing having come by `probe_at`, the
  // silent-peer probe is sent once, which an HTTP server answers and a daemon skips.
  std::optional<proto::ControlMessage> next(SteadyPoint deadline, std::string& problem,
                                            std::optional<SteadyPoint> probe_at = std::nullopt) {
    std::string payload;
    char buffer[4096];
    boost::system::error_code error;
    for (;;) {
      auto status = decoder.next(payload);
      if (status == proto::FrameDecoder::Status::Frame) {
        ++frames_read;
        break;
      }
      if (status == proto::FrameDecoder::Status::Error) {
        problem = not_a_frame_text();
        return std::nullopt;
      }
      bool probe_due = probe_at && first_bytes.empty();
      FdWait waited = wait_for_fd(socket.native_handle(), POLLIN, probe_due ? *probe_at : deadline);
      if (waited == FdWait::TimedOut && probe_due) {
        probe_at.reset();
        send_before(socket, std::string(proto::kSilentPeerProbe), deadline);  // a close shows next
        continue;
      }
      if (waited != FdWait::Ready) {
        problem = first_bytes.empty()
                      ? cat("it accepted the connection but sent nothing within the timeout: a "
                            "cohortd stopped or overloaded, or another service (",
                            kControlPortHint, ")")
                      : "no whole answer within the timeout";
        return std::nullopt;
      }
      size_t got = socket.read_some(boost::asio::buffer(buffer), error);
      if (error == boost::asio::error::would_block) continue;
      // A peer that closed at once resets the connection the probe then reached.
      if (error == boost::asio::error::eof || error == boost::asio::error::connection_reset) {
        problem = first_bytes.empty()
                      ? cat("it closed the connection without a word (", kControlPortHint, ")")
                      : "it closed the connection without a whole answer";
        return std::nullopt;
      }
      if (error) {
        problem = error.message();
        return std::nullopt;
      }
      if (first_bytes.size() < kShownBytes)
        first_bytes.append(buffer, std::min(got, kShownBytes - first_bytes.size()));
      decoder.feed(buffer, got);
    }
    return proto::decode_message(payload, problem);
  }

  // Why the bytes that came are not the frames of a cohortd.
  std::string not_a_frame_text() const {
    if (frames_read > 0) return "a frame larger than the protocol's limit";
    if (proto::speaks_http(first_bytes)) {
      return cat("it answers HTTP: is it a daemon's --http-port? (", kControlPortHint, ")");
    }
    return "it is not a cohortd: its first bytes are no cohort frame ('" +
           escape_for_terminal(one_line(first_bytes)) + "')";
  }
};

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
  FrameReader reader{socket};
  std::string problem;
  // Sent first, as the agent does: an HTTP server answers it, a daemon skips it (and one whose
  // port is shared with the workers' store challenges at once for it).
  SteadyPoint probe_at = std::chrono::steady_clock::now();
  std::optional<proto::ControlMessage> message = reader.next(deadline, problem, probe_at);
  auto* challenge = message ? std::get_if<proto::Challenge>(&*message) : nullptr;
  if (challenge == nullptr) {
    return {std::move(message), kExitRendezvous,
            "no challenge from " + endpoint + ": " + (problem.empty() ? "unexpected" : problem)};
  }
  reader.decoder.set_max_frame_bytes(max_answer_bytes);
  std::string request = proto::encode_frame(proto::encode_message(make_request(challenge->nonce)));
  error = send_before(socket, request, deadline);
  if (error)
    return {std::nullopt, kExitRendezvous, "cannot send to " + endpoint + ": " + error.message()};
  message = reader.next(deadline, problem);
  if (!message)
    return {std::nullopt, kExitRendezvous, "no answer from " + endpoint + ": " + problem};
  return {std::move(message), kExitSuccess, ""};
}

void add_timeout_flag(CLI::App& app, int& timeout_ms) {
  app.add_option_function<double>(
         "--timeout",
         [&timeout_ms](double seconds) { timeout_ms = static_cast<int>(seconds * 1000); },
         "Seconds for the daemon to answer, connect included (default 5; a daemon busy with "
         "strangers may need more)")
      ->type_name("SECONDS")
      ->check(number_within(0.1, 600, "seconds"));
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
