#include "proto/auth.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <initializer_list>
#include <stdexcept>

#include "common/random_bits.hpp"

namespace cohort::proto {
namespace {

std::string to_hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    hex.push_back(kDigits[data[i] >> 4]);
    hex.push_back(kDigits[data[i] & 0xf]);
  }
  return hex;
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size);
  return to_hex(digest, size);
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  return to_hex(digest, size);
}

bool proofs_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

std::string random_nonce(size_t bytes) {
  std::string raw(bytes, '\0');
  random_bytes(raw.data(), raw.size());
  return to_hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

namespace {

std::string joined(std::initializer_list<std::string_view> parts) {
  std::string text;
  for (std::string_view part : parts) {
    text.append(part);
    text.push_back('\n');
  }
  return text;
}

}  // namespace

std::string hello_proof(std::string_view key, std::string_view challenge,
                        std::string_view client_nonce, std::string_view run_id,
                        std::string_view node_id) {
  return hmac_sha256_hex(key, joined({"cohort-hello", challenge, client_nonce, run_id, node_id}));
}

std::string welcome_proof(std::string_view key, std::string_view challenge,
                          std::string_view client_nonce) {
  return hmac_sha256_hex(key, joined({"cohort-welcome", challenge, client_nonce}));
}

std::string status_proof(std::string_view key, std::string_view challenge,
                         std::string_view run_id) {
  return hmac_sha256_hex(key, joined({"cohort-status", challenge, run_id}));
}

std::string events_proof(std::string_view key, std::string_view challenge,
                         std::string_view run_id) {
  return hmac_sha256_hex(key, joined({"cohort-events", challenge, run_id}));
}

std::string stop_proof(std::string_view key, std::string_view challenge, std::string_view run_id,
                       std::string_view reason, std::string_view by) {
  if (by.empty()) return hmac_sha256_hex(key, joined({"cohort-stop", challenge, run_id, reason}));
  return hmac_sha256_hex(key, joined({"cohort-stop", challenge, run_id, reason, by}));
}

std::string answer_proof(std::string_view key, std::string_view kind, std::string_view challenge,
                         std::string_view client_nonce, std::string_view run_id,
                         std::string_view answer_digest) {
  return hmac_sha256_hex(
      key, joined({"cohort-answer", kind, challenge, client_nonce, run_id, answer_digest}));
}

std::string derive_run_token(std::string_view daemon_token, std::string_view run_id) {
  return hmac_sha256_hex(daemon_token, std::string("cohort-run-token\n") + std::string(run_id));
}

}  // namespace cohort::proto
