#include "agent/error_file.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/text.hpp"
#include "common/untrusted_file.hpp"
#include "proto/untrusted_json.hpp"

namespace cohort {
namespace {

// A worker writes the file, so it may be anything: only a regular file is read, at most its
// first MiB, and nesting is limited while parsing.
std::optional<nlohmann::json> read_json(const std::string& path) {
  constexpr size_t kMaxErrorFileBytes = 1 << 20;
  UntrustedRead file = read_untrusted_file(path, kMaxErrorFileBytes);  // a FIFO: not read
  if (!file.ok) return std::nullopt;
  nlohmann::json parsed = proto::parse_untrusted_json(file.bytes);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return parsed;
}

std::string string_field(const nlohmann::json& object, const char* name) {
  auto found = object.find(name);
  if (found == object.end()) return {};
  return found->is_string() ? found->get<std::string>() : found->dump();
}

// torchrun's exit code of a worker: its own, or minus the signal that ended it.
int torchrun_exit_code(const ExitStatus& status) {
  return status.signaled ? -status.signal : status.code;
}

}  // namespace

void load_error_file(WorkerFailure& failure) {
  if (failure.error_file.empty()) return;
  std::optional<nlohmann::json> parsed = read_json(failure.error_file);
  if (!parsed) return;
  failure.error_file_written = true;
  const nlohmann::json& message = (*parsed)["message"];
  if (message.is_string()) {
    failure.error_message = message.get<std::string>();
    return;
  }
  if (!message.is_object()) return;
  failure.error_message = string_field(message, "message");
  auto extra = message.find("extraInfo");
  if (extra == message.end() || !extra->is_object()) return;
  failure.traceback = string_field(*extra, "py_callstack");
  auto seconds = parse_double(string_field(*extra, "timestamp"));
  // Anything a system_clock duration can hold (a worker may write any number).
  if (seconds && std::isfinite(*seconds) && std::fabs(*seconds) < 1e11) {
    failure.time = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(*seconds)));
  }
}

bool write_root_cause_file(const std::string& path, const WorkerFailure& root_cause) {
  nlohmann::json document;
  if (auto original = read_json(root_cause.error_file)) document = *original;
  if (!document.contains("message")) {
    auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(root_cause.time.time_since_epoch());
    document["message"] = {
        {"message",
         cat("worker rank ", root_cause.rank, " failed: ", root_cause.status.describe())},
        {"extraInfo", {{"py_callstack", ""}, {"timestamp", std::to_string(seconds.count())}}}};
  }
  // Where torchrun puts it (override_error_code_in_rootcause_data): in the message, and not at
  // all when the message is a plain string.
  nlohmann::json& message = document["message"];
  if (message.is_object()) message["errorCode"] = torchrun_exit_code(root_cause.status);
  std::ofstream out(path, std::ios::trunc);
  out << document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return static_cast<bool>(out);
}

}  // namespace cohort
