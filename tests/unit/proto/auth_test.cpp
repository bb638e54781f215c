#include "proto/auth.hpp"

#include <catch2/catch.hpp>
#include <set>

using namespace cohort::proto;

TEST_CASE("HMAC-SHA256 matches RFC 4231's test vectors", "[unit][proto][auth]") {
  // Test case 1: a 20-byte key of 0x0b, "Hi There".
  CHECK(hmac_sha256_hex(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: a key shorter than the block, "Jefe".
  CHECK(hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a 131-byte key, longer than the block.
  CHECK(hmac_sha256_hex(std::string(131, '\xaa'),
                        "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("proofs compare equal only when every byte is", "[unit][proto][auth]") {
  std::string proof = hmac_sha256_hex("a token of sixteen+", "challenge");
  CHECK(proofs_equal(proof, proof));
  std::string flipped = proof;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  CHECK_FALSE(proofs_equal(proof, flipped));
  CHECK_FALSE(proofs_equal(proof, proof.substr(1)));
  CHECK_FALSE(proofs_equal("", "x"));
}

TEST_CASE("nonces are hex of the asked size and do not repeat", "[unit][proto][auth]") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string nonce = random_nonce(32);
    CHECK(nonce.size() == 64);
    CHECK(nonce.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(nonce);
  }
  CHECK(seen.size() == 100);
}

TEST_CASE("run tokens differ per run and per daemon token", "[unit][proto][auth]") {
  std::string a = derive_run_token("daemon token one", "job");
  CHECK(a == derive_run_token("daemon token one", "job"));
  CHECK(a != derive_run_token("daemon token one", "job2"));
  CHECK(a != derive_run_token("daemon token two", "job"));
  CHECK(a.size() == 64);
}

TEST_CASE("status, events and stop proofs differ for the same challenge and run",
          "[unit][proto][auth]") {
  std::string status = status_proof("token", "challenge", "job");
  std::string events = events_proof("token", "challenge", "job");
  std::string stop = stop_proof("token", "challenge", "job", "");
  CHECK(status != events);
  CHECK(status != stop);
  CHECK(events != stop);
  CHECK(stop != stop_proof("token", "challenge", "job", "other reason"));
  CHECK(stop != stop_proof("token", "challenge2", "job", ""));
  // Who asks is covered when given; without it the proof is what it always was.
  CHECK(stop == stop_proof("token", "challenge", "job", "", ""));
  CHECK(stop != stop_proof("token", "challenge", "job", "", "alice@login1"));
  CHECK(stop_proof("token", "challenge", "job", "", "alice@login1") !=
        stop_proof("token", "challenge", "job", "", "mallory@login1"));
}

TEST_CASE(
    "an answer's proof covers its kind, the challenge, the tool's nonce, the run and the answer",
    "[unit][proto][auth]") {
  std::string proof = answer_proof("token", "status", "challenge", "nonce", "job", "digest");
  CHECK(proof == answer_proof("token", "status", "challenge", "nonce", "job", "digest"));
  CHECK(proof != answer_proof("token", "stop", "challenge", "nonce", "job", "digest"));
  CHECK(proof != answer_proof("token", "status", "challenge2", "nonce", "job", "digest"));
  CHECK(proof != answer_proof("token", "status", "challenge", "nonce2", "job", "digest"));
  CHECK(proof != answer_proof("token", "status", "challenge", "nonce", "job2", "digest"));
  CHECK(proof != answer_proof("token2", "status", "challenge", "nonce", "job", "digest"));
  CHECK(proof != answer_proof("token", "status", "challenge", "nonce", "job", "digest2"));
  // Not any proof a tool itself sends for the same connection.
  CHECK(proof != status_proof("token", "challenge", "job"));
}

TEST_CASE("sha256_hex is SHA-256 in lowercase hex", "[unit][proto][auth]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
