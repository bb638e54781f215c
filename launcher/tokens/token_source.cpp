#include "launcher/tokens/token_source.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/text.hpp"
#include "proto/auth.hpp"

namespace cohort {
namespace {

std::string check_length(const std::string& token, const std::string& source) {
  if (token.size() < proto::kMinTokenBytes) {
    return cat(source, ": the token has ", token.size(), " bytes; at least ", proto::kMinTokenBytes,
               " are needed");
  }
  if (token.size() > kMaxTokenBytes) {
    return cat(source, ": the token has more than ", kMaxTokenBytes, " bytes");
  }
  return {};
}

TokenResult read_token_file(const std::string& path) {
  const std::string source = "--token-file " + path;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {{}, cat(source, ": ", std::strerror(errno))};
  if (!S_ISREG(info.st_mode)) return {{}, source + ": not a regular file"};
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return {{}, source + ": readable by others than its owner (chmod 600 it)"};
  }
  std::ifstream in(path, std::ios::binary);
  std::string token(kMaxTokenBytes + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return {token, check_length(token, source)};
}

}  // namespace

TokenResult load_token(const std::string& token_file,
                       const std::map<std::string, std::string>& env) {
  if (!token_file.empty()) return read_token_file(token_file);
  auto found = env.find("COHORT_TOKEN");
  if (found == env.end()) return {};
  return {found->second, check_length(found->second, "COHORT_TOKEN")};
}

}  // namespace cohort
