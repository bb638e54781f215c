// libFuzzer target: the text a launcher reads from its user, its environment and its workers,
// each parser given any bytes. The first byte picks the parser: MPI/DeepSpeed hostfiles and -H
// lists filtered by --include/--exclude, --rdzv-conf, a Slurm step's SLURM_* variables, the
// token and secrets lines of `cohort launch` and its env files, FileTimer requests (one JSON
// line each) applied in turn, byte sizes and CPU lists, CUDA_VISIBLE_DEVICES, and a batch job's
// allocation (Slurm, PBS, LSF). Each must answer or refuse, and what it accepts must keep its
// promises: slots in range, heartbeat floors, a port from the job id, a token line, a secrets
// line and a CPU list that read back to themselves, env files' variables that a shell would
// take, timers that wake within a day.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/file_timers.hpp"
#include "common/text.hpp"
#include "launcher/launch/allocation.hpp"
#include "launcher/launch/forwarded_env.hpp"
#include "launcher/launch/hostfile.hpp"
#include "launcher/options/byte_size.hpp"
#include "launcher/options/rdzv_conf.hpp"
#include "launcher/slurm/slurm_env.hpp"
#include "launcher/tokens/launch_token.hpp"
#include "launcher/topology/visible_gpus.hpp"
#include "process/cpu_binding.hpp"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

// "text\x01include\x01exclude": the hosts' text and the two filters.
std::vector<std::string> fields(const std::string& text, size_t count) {
  std::vector<std::string> parts = cohort::split(text, '\x01');
  parts.resize(count);
  return parts;
}

void check_hosts(const cohort::HostSelection& selection) {
  for (const cohort::HostSlots& host : selection.hosts) {
    require(host.slots >= 1 && host.slots <= 4096);
    require(host.workers() >= 1 && host.workers() <= host.slots);
    require(std::is_sorted(host.kept.begin(), host.kept.end()));
    require(std::adjacent_find(host.kept.begin(), host.kept.end()) == host.kept.end());
    for (int slot : host.kept) require(slot >= 0 && slot < host.slots);
    require(cohort::visible_devices(host).empty() == host.kept.empty());
  }
}

void hosts(const std::string& text, bool hostfile) {
  std::vector<std::string> parts = fields(text, 3);
  cohort::HostSelection selection =
      hostfile ? cohort::parse_hostfile(parts[0], "hosts") : cohort::parse_host_list(parts[0]);
  check_hosts(selection);
  std::set<std::string> names;
  for (const auto& host : selection.hosts) require(names.insert(host.address()).second);
  cohort::filter_hosts(selection, parts[1], parts[2]);
  check_hosts(selection);
  if (selection.problems.empty() && !(parts[1].empty() && parts[2].empty()))
    require(!selection.hosts.empty());
}

void rdzv_conf(const std::string& text) {
  std::vector<std::string> problems;
  cohort::RdzvConf conf = cohort::parse_rdzv_conf(text, problems);
  if (!problems.empty()) return;
  require(conf.heartbeat_interval >= cohort::kMinHeartbeatInterval);
  require(conf.heartbeat_timeout >= cohort::kMinHeartbeatTimeout);
  require(conf.heartbeat_timeout >= 2 * conf.heartbeat_interval);
  require(conf.join_timeout.count() > 0 && conf.last_call_timeout.count() > 0);
}

// "NAME=value" lines, as an environment.
std::map<std::string, std::string> env_lines(const std::string& text) {
  std::map<std::string, std::string> env;
  for (const std::string& line : cohort::split(text, '\n')) {
    size_t equals = line.find('=');
    if (equals != std::string::npos) env[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return env;
}

// A Slurm step's environment.
void slurm(const std::string& text) {
  auto env = env_lines(text);
  auto defaults = cohort::slurm_defaults(env);
  if (!defaults || !defaults->rdzv_endpoint) return;
  const std::string& endpoint = defaults->rdzv_endpoint->value;
  auto port = cohort::parse_int(endpoint.substr(endpoint.rfind(':') + 1));
  require(port && *port >= cohort::kSlurmFirstPort && *port <= cohort::kSlurmLastPort);
}

// A batch job's environment, whose node files (PBS_NODEFILE, LSB_DJOB_HOSTFILE) hold the same
// text: cohort launch's hosts when it is given none.
void allocation(const std::string& text) {
  auto found = cohort::find_allocation(
      env_lines(text), [&](const std::string&) -> std::optional<std::string> { return text; });
  if (!found) return;
  check_hosts(found->selection);
  std::set<std::string> names;
  for (const auto& host : found->selection.hosts) require(names.insert(host.address()).second);
  if (found->selection.problems.empty()) require(!found->selection.hosts.empty());
}

void token(const std::string& text) {
  cohort::TokenResult result = cohort::parse_token_line(text);
  if (!result.error.empty()) return;
  require(result.token.size() <= cohort::kMaxTokenBytes);
  require(cohort::token_line(result.token) == text + "\n");
}

// What follows the token over stdin, and what sets variables on every host: the secrets line
// (what it accepts writes back to the same variables) and an env file (names a shell takes,
// values of one line).
void secrets_and_env_file(const std::string& text) {
  cohort::SecretsResult secrets = cohort::parse_secrets_line(text);
  if (secrets.error.empty()) {
    std::string line = cohort::secrets_line(secrets.variables);
    cohort::SecretsResult again = cohort::parse_secrets_line(line.substr(0, line.size() - 1));
    require(again.error.empty() && again.variables == secrets.variables);
  }
  cohort::ForwardedEnv env = cohort::forwarded_env({}, text, "env", {});
  for (const auto& [name, value] : env.vars) {
    require(cohort::is_variable_name(name));
    require(value.find('\n') == std::string::npos);
  }
}

// Request lines applied in turn; at each, the next wake-up and what has expired by then.
void file_timers(const std::string& text) {
  cohort::FileTimers timers;
  double now = 1.7e9;
  for (const std::string& line : cohort::split(text, '\n')) {
    std::string error;
    auto request = cohort::parse_timer_request(line, error);
    if (request) timers.apply(*request);
    auto next = timers.next_expiration();
    if (!next) continue;
    auto wait = cohort::timer_wait(*next, now);
    require(wait.count() >= 0 && wait <= cohort::kMaxTimerWait);
    now += static_cast<double>(line.size());
    std::set<pid_t> reaped;
    for (const auto& expired : timers.take_expired(now)) {
      require(expired.expiration_time <= now && expired.signal > 0);
      require(reaped.insert(expired.pid).second);
    }
  }
}

void sizes_and_cpus(const std::string& text) {
  if (auto bytes = cohort::parse_byte_size(text)) require(*bytes > 0 && *bytes < (1ULL << 63));
  auto cpus = cohort::parse_cpu_list(text);
  if (!cpus) return;
  require(std::is_sorted(cpus->begin(), cpus->end()));
  auto again = cohort::parse_cpu_list(cohort::cpu_list_text(*cpus));
  require(again && *again == *cpus);
}

void visible_gpus(const std::string& text, int physical) {
  int count = cohort::visible_gpu_count(physical, text.c_str());
  require(count >= 0);
  if (auto indices = cohort::visible_gpu_indices(physical, text.c_str())) {
    require(static_cast<int>(indices->size()) == count);
    for (int index : *indices) require(index >= 0 && index < physical);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 9) {
    case 0:
      return hosts(text, true), 0;
    case 1:
      return hosts(text, false), 0;
    case 2:
      return rdzv_conf(text), 0;
    case 3:
      return slurm(text), 0;
    case 4:
      return token(text), secrets_and_env_file(text), 0;
    case 5:
      return file_timers(text), 0;
    case 6:
      return sizes_and_cpus(text), 0;
    case 7:
      return allocation(text), 0;
    default:
      return visible_gpus(text, data[0] / 8), 0;
  }
}
