#include "launcher/status_command.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <iostream>

#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "proto/control_frame.hpp"
#include "proto/control_messages.hpp"
#include "proto/untrusted_json.hpp"

namespace cohort {
namespace {

void print_table(const nlohmann::json& status) {
  const auto& runs = status["runs"];
  if (runs.empty()) {
    std::cout << "no runs\n";
    return;
  }
  for (const auto& run : runs) {
    std::cout << "run " << run["run_id"].get<std::string>() << ": "
              << run["phase"].get<std::string>() << ", round " << run["round"] << ", restarts "
              << run["restarts_used"] << "/" << run["max_restarts"] << ", nodes "
              << run["min_nodes"] << ":" << run["max_nodes"] << ", worker store port "
              << run["store_port"] << "\n";
    for (const auto& node : run["nodes"]) {
      std::cout << "  " << node["address"].get<std::string>() << "  "
                << node["state"].get<std::string>();
      if (node["group_rank"].get<int>() >= 0) std::cout << "  rank " << node["group_rank"];
      std::cout << "  workers " << node["local_world_size"]
                << (node["succeeded"].get<bool>() ? "  done" : "") << "  ("
                << node["node_id"].get<std::string>() << ")\n";
    }
  }
}

}  // namespace

int run_status_command(const std::string& endpoint, bool json, int timeout_ms) {
  auto target = parse_host_port(endpoint, 29400);
  if (!target) {
    std::cerr << "cohort status: --rdzv-endpoint: expected host[:port], got '" << endpoint << "'\n";
    return kExitUsage;
  }
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  ip::tcp::socket socket(io);
  boost::system::error_code error;
  ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(target->host, std::to_string(target->port), error);
  if (!error) boost::asio::connect(socket, results, error);
  if (error) {
    std::cerr << "cohort status: cannot reach " << target->host << ":" << target->port << ": "
              << error.message() << "\n";
    return kExitRendezvous;
  }
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  boost::asio::write(
      socket,
      boost::asio::buffer(proto::encode_frame(proto::encode_message(proto::StatusRequest{}))),
      error);
  proto::FrameDecoder decoder;
  std::string payload;
  char buffer[4096];
  while (!error && decoder.next(payload) == proto::FrameDecoder::Status::NeedMore) {
    size_t got = socket.read_some(boost::asio::buffer(buffer), error);
    decoder.feed(buffer, got);
  }
  std::string problem;
  auto message = error ? std::nullopt : proto::decode_message(payload, problem);
  auto* reply = message ? std::get_if<proto::StatusReply>(&*message) : nullptr;
  if (reply == nullptr) {
    std::cerr << "cohort status: no status from " << endpoint << ": "
              << (error ? error.message() : problem) << "\n";
    return kExitRendezvous;
  }
  if (json) {
    std::cout << reply->json << "\n";
  } else {
    nlohmann::json status = proto::parse_untrusted_json(reply->json);
    if (!status.is_object()) {
      std::cerr << "cohort status: " << endpoint << " sent a status that is not a JSON object\n";
      return kExitRendezvous;
    }
    print_table(status);
  }
  return kExitSuccess;
}

}  // namespace cohort
