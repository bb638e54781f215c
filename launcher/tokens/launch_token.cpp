#include "launcher/tokens/launch_token.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

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
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::string line;
  while (line.size() < kMaxLineBytes) {
    FdWait waited = wait_for_fd(fd, POLLIN, deadline);
    if (waited == FdWait::TimedOut) {
      return failed(cat("no token line on stdin within ", limit.count(),
                        " ms (this flag is cohort launch's own)"));
    }
    char byte = 0;
    ssize_t got = waited == FdWait::Failed ? -1 : ::read(fd, &byte, 1);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) return failed(cat("cannot read the token line on stdin: ", std::strerror(errno)));
    if (got == 0) return failed("stdin ended before the token line (cohort launch writes it)");
    if (byte == '\n') return parse_token_line(line);
    line.push_back(byte);
  }
  return failed(cat("the first line on stdin is longer than ", kMaxLineBytes, " bytes"));
}

}  // namespace cohort
