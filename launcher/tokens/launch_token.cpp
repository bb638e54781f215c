#include "launcher/tokens/launch_token.hpp"

#include <poll.h>
#include <unistd.h>

#include <boost/algorithm/string/predicate.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "common/fd_wait.hpp"
#include "common/text.hpp"
#include "proto/auth.hpp"

namespace cohort {
namespace {

constexpr std::string_view kPrefix = "token ";
constexpr std::string_view kNone = "none";
/// "token " + a 4096-byte token in hex + the newline.
constexpr size_t kMaxLineBytes = kPrefix.size() + 2 * kMaxTokenBytes + 1;
constexpr std::string_view kSource = "--under-launch: ";
constexpr std::string_view kSecretsPrefix = "env";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xf]);
  }
  return hex;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int high = hex_digit(hex[i]);
    int low = hex_digit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(high << 4 | low));
  }
  return bytes;
}

TokenResult failed(const std::string& why) { return {{}, cat(kSource, why)}; }

// One line of `fd` (a byte at a time, nothing past its newline) within `limit`, at most
// `max_bytes`; or why not (`which`: "token line", "secrets line"), naming --under-launch.
std::pair<std::string, std::string> read_line(int fd, std::chrono::milliseconds limit,
                                              size_t max_bytes, std::string_view which) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::string line;
  while (line.size() < max_bytes) {
    FdWait waited = wait_for_fd(fd, POLLIN, deadline);
    if (waited == FdWait::TimedOut) {
      return {{},
              cat(kSource, "no ", which, " on stdin within ", limit.count(),
                  " ms (this flag is cohort launch's own)")};
    }
    char byte = 0;
    ssize_t got = waited == FdWait::Failed ? -1 : ::read(fd, &byte, 1);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0)
      return {{}, cat(kSource, "cannot read the ", which, " on stdin: ", std::strerror(errno))};
    if (got == 0)
      return {{}, cat(kSource, "stdin ended before the ", which, " (cohort launch writes it)")};
    if (byte == '\n') return {line, {}};
    line.push_back(byte);
  }
  return {{}, cat(kSource, "the ", which, " on stdin is longer than ", max_bytes, " bytes")};
}

}  // namespace

TokenResult launch_token(const std::string& token_file,
                         const std::map<std::string, std::string>& env, bool hosts_daemon) {
  TokenResult given = load_token(token_file, env);
  if (!given.token.empty() || !given.error.empty() || !hosts_daemon) return given;
  return {proto::random_nonce(32), {}};
}

std::string ready_line(const std::string& version) { return cat(kReadyPrefix, version, "\n"); }

std::string token_line(const std::string& token) {
  return cat(kPrefix, token.empty() ? std::string(kNone) : to_hex(token), "\n");
}

TokenResult parse_token_line(std::string_view line) {
  if (line.substr(0, kPrefix.size()) != kPrefix) {
    return failed("the first line on stdin is not 'token HEX' (cohort launch writes it)");
  }
  std::string_view value = line.substr(kPrefix.size());
  if (value == kNone) return {};
  std::optional<std::string> token = from_hex(value);
  if (!token) return failed("the token line on stdin is not lowercase hex");
  if (token->size() < proto::kMinTokenBytes || token->size() > kMaxTokenBytes) {
    return failed(cat("the token on stdin has ", token->size(), " bytes; ", proto::kMinTokenBytes,
                      " to ", kMaxTokenBytes, " are needed"));
  }
  return {std::move(*token), {}};
}

TokenResult read_token_line(int fd, std::chrono::milliseconds limit) {
  auto [line, error] = read_line(fd, limit, kMaxLineBytes, "token line");
  if (!error.empty()) return {{}, error};
  return parse_token_line(line);
}

bool secret_variable_name(std::string_view name) {
  for (std::string_view word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL"}) {
    if (boost::algorithm::icontains(name, word)) return true;
  }
  return false;
}

std::string secrets_line(const SecretVariables& secrets) {
  std::string line(kSecretsPrefix);
  for (const auto& [name, value] : secrets) line += cat(" ", name, "=", to_hex(value));
  return line + "\n";
}

SecretsResult parse_secrets_line(std::string_view line) {
  std::vector<std::string> words = split(std::string(line), ' ');
  if (words.empty() || words[0] != kSecretsPrefix) {
    return {{},
            cat(kSource,
                "the second line on stdin is not 'env NAME=HEX ...' (cohort launch "
                "writes it)")};
  }
  SecretsResult result;
  for (size_t i = 1; i < words.size(); ++i) {
    size_t equals = words[i].find('=');
    std::string name = words[i].substr(0, equals);
    std::optional<std::string> value =
        equals == std::string::npos ? std::nullopt : from_hex(words[i].substr(equals + 1));
    if (!is_variable_name(name) || !value) {
      return {{}, cat(kSource, "the secrets line on stdin has a word that is not NAME=HEX")};
    }
    result.variables.emplace_back(std::move(name), std::move(*value));
  }
  return result;
}

SecretsResult read_secrets_line(int fd, std::chrono::milliseconds limit) {
  auto [line, error] = read_line(fd, limit, kMaxSecretsLineBytes, "secrets line");
  if (!error.empty()) return {{}, error};
  return parse_secrets_line(line);
}

}  // namespace cohort
