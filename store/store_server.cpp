#include "store/store_server.hpp"

#include "store/store_service.hpp"

namespace cohort {

StoreServer::StoreServer(boost::asio::io_context& io, StoreServerOptions options)
    : service_(std::make_shared<StoreService>(io, std::move(options))) {}

StoreServer::~StoreServer() { stop(); }

boost::system::error_code StoreServer::start() {
  auto error = service_->listen();
  if (!error) service_->start_accepting();
  return error;
}

uint16_t StoreServer::port() const { return service_->port(); }

void StoreServer::stop() { service_->close(); }

void StoreServer::adopt(boost::asio::ip::tcp::socket socket) { service_->adopt(std::move(socket)); }

void StoreServer::set_allowed_peers(std::optional<std::vector<boost::asio::ip::address>> peers) {
  service_->set_allowed_peers(std::move(peers));
}

size_t StoreServer::connection_count() const { return service_->connection_count(); }

uint64_t StoreServer::operations() const { return service_->operations(); }

const Store& StoreServer::store() const { return service_->store(); }

void StoreServer::read_store(const std::function<void(const Store&)>& reader) const {
  service_->read_store(reader);
}

}  // namespace cohort
