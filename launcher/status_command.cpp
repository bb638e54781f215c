#include "launcher/status_command.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <iostream>

#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "proto/auth.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"

namespace cohort {

namespace {

std::string step_seconds(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", static_cast<double>(ms) / 1000.0);
  return text;
}

// The slowest ranks of the round against the run's median step time (from step heartbeats).
void print_slowest(const proto::StatusRun& run, std::ostream& out) {
  if (run.slowest.empty() || run.median_step_ms <= 0) return;
  out << "  slowest ranks (median step " << step_seconds(run.median_step_ms) << "):\n";
  for (const proto::StatusRank& rank : run.slowest) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f",
                  static_cast<double>(rank.step_ms) / static_cast<double>(run.median_step_ms));
    out << "    rank " << rank.rank << " on " << rank.node << "  " << step_seconds(rank.step_ms)
        << " per step  " << ratio << " x the median\n";
  }
}

}  // namespace

void print_status_table(const proto::StatusReply& status, std::ostream& out) {
  if (status.runs.empty()) {
    out << "no runs\n";
    return;
  }
  for (const proto::StatusRun& run : status.runs) {
    out << "run " << run.run_id << ": " << run.phase << ", round " << run.round << ", restarts "
        << run.restarts_used << "/" << run.max_restarts << ", nodes " << run.min_nodes << ":"
        << run.max_nodes << ", worker store port " << run.store_port << "\n";
    for (const proto::StatusNode& node : run.nodes) {
      out << "  " << node.address << "  " << node.state;
      if (node.group_rank >= 0) out << "  rank " << node.group_rank;
      out << "  workers " << node.local_world_size << (node.succeeded ? "  done" : "") << "  ("
          << node.node_id << ")\n";
    }
    print_slowest(run, out);
  }
}

namespace {

// The next message on a blocking socket; nullopt (with `problem` set) on a read error, a timeout
// (each read's, or `deadline` for the whole: a peer that drips bytes cannot hold us longer) or a
// malformed frame.
std::optional<proto::ControlMessage> read_message(boost::asio::ip::tcp::socket& socket,
                                                  proto::FrameDecoder& decoder,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::string& problem) {
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

StatusFetch fetch_status(const StatusQuery& query) {
  auto target = parse_host_port(query.endpoint, 29400);
  if (!target) {
    return {std::nullopt, kExitUsage,
            "--rdzv-endpoint: expected host[:port], got '" + query.endpoint + "'"};
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
  timeval timeout{query.timeout_ms / 1000, (query.timeout_ms % 1000) * 1000};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  proto::FrameDecoder decoder(proto::kMaxStatusFrameBytes);
  std::string problem;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(query.timeout_ms);
  std::optional<proto::ControlMessage> message = read_message(socket, decoder, deadline, problem);
  auto* challenge = message ? std::get_if<proto::Challenge>(&*message) : nullptr;
  if (challenge != nullptr) {
    proto::StatusRequest request{query.run_id, ""};
    if (!query.token.empty()) {
      request.proof = proto::status_proof(query.token, challenge->nonce, query.run_id);
    }
    boost::asio::write(
        socket, boost::asio::buffer(proto::encode_frame(proto::encode_message(request))), error);
    message = error ? std::nullopt : read_message(socket, decoder, deadline, problem);
  }
  auto* reply = message ? std::get_if<proto::StatusReply>(&*message) : nullptr;
  if (reply == nullptr) {
    const auto* refusal = message ? std::get_if<proto::Error>(&*message) : nullptr;
    return {std::nullopt, kExitRendezvous,
            "no status from " + query.endpoint + ": " + (refusal ? refusal->message : problem)};
  }
  return {std::move(*reply), kExitSuccess, ""};
}

int run_status_command(const StatusQuery& query) {
  StatusFetch fetched = fetch_status(query);
  if (!fetched.reply) {
    std::cerr << "cohort status: " << fetched.problem << "\n";
    return fetched.exit_code;
  }
  if (query.json) {
    std::cout << proto::encode_status_document(*fetched.reply) << "\n";
  } else {
    print_status_table(*fetched.reply, std::cout);
  }
  return kExitSuccess;
}

}  // namespace cohort
