#include "launcher/options/run_environment.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include "common/nvml.hpp"
#include "launcher/topology/hwloc_topology.hpp"
#include "process/process_spawner.hpp"

namespace cohort {
namespace {

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Resolves `host` and accepts it when an address is loopback or can be bound here (no reverse
// lookups: a name that resolves to a foreign address is not this machine).
bool is_local_host(const std::string& host) {
  namespace ip = boost::asio::ip;
  if (host == "localhost") return true;
  boost::asio::io_context io;
  ip::udp::resolver resolver(io);
  boost::system::error_code error;
  auto results = resolver.resolve(host, "0", error);
  if (error) return false;
  for (const auto& entry : results) {
    ip::address address = entry.endpoint().address();
    if (address.is_loopback()) return true;
    ip::udp::socket probe(io);
    probe.open(entry.endpoint().protocol(), error);
    if (!error) probe.bind(ip::udp::endpoint(address, 0), error);
    if (!error) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> RunEnvironment::var(const std::string& name) const {
  auto found = env.find(name);
  if (found == env.end()) return std::nullopt;
  return found->second;
}

RunEnvironment machine_run_environment(char** environ_block) {
  RunEnvironment machine;
  machine.env = parse_environ(environ_block);
  machine.host_name = host_name();
  machine.cpu_count = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  machine.gpu_count = [] { return nvml_device_count().value_or(0); };
  machine.topology = [](std::string& error) {
    return load_machine_topology(nvml_pci_bus_ids().value_or(std::vector<std::string>()), error);
  };
  std::string path = machine.var("PATH").value_or("");
  machine.find_executable = [path](const std::string& name) {
    std::string found = find_executable(name, path);
    return !found.empty() && ::access(found.c_str(), X_OK) == 0 ? found : std::string();
  };
  machine.path_exists = [](const std::string& name) {
    struct stat info {};
    return ::stat(name.c_str(), &info) == 0;
  };
  machine.is_local_host = is_local_host;
  return machine;
}

}  // namespace cohort
