// The HTTP server's pure parts: the Authorization header's check.
#include "observe/http_server.hpp"

#include <catch2/catch.hpp>

using cohort::observe::bearer_matches;

TEST_CASE("a bearer token is taken with the scheme in any case and the token exact",
          "[unit][observe][http]") {
  CHECK(bearer_matches("Bearer s3cret", "s3cret"));
  CHECK(bearer_matches("bearer s3cret", "s3cret"));  // RFC 7235: the scheme is case-insensitive
  CHECK(bearer_matches("BEARER s3cret", "s3cret"));
  CHECK(bearer_matches("bEaReR s3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearer S3CRET", "s3cret"));  // the token itself is not
  CHECK_FALSE(bearer_matches("Bearer s3cre", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearer s3crets", "s3cret"));
  CHECK_FALSE(bearer_matches("Basic s3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearers3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("Bearer\ts3cret", "s3cret"));
  CHECK_FALSE(bearer_matches("", "s3cret"));
}

TEST_CASE("a Host header is this machine's when it is an address, localhost or its name",
          "[unit][http]") {
  using cohort::observe::host_header_allowed;
  for (const char* host : {"", "127.0.0.1", "127.0.0.1:9090", "[::1]:9090", "[::1]", "localhost",
                           "LOCALHOST:80", "localhost.:80", "node7", "Node7:9090", "10.1.2.3:1"}) {
    INFO(host);
    CHECK(host_header_allowed(host, "node7"));
  }
  // Names a web page can rebind to 127.0.0.1 (DNS rebinding).
  for (const char* host :
       {"attacker.example", "attacker.example:9090", "localhost.attacker.example",
        "127.0.0.1.nip.io", "node7.attacker.example", "[::1", "node8"}) {
    INFO(host);
    CHECK_FALSE(host_header_allowed(host, "node7"));
  }
  CHECK_FALSE(host_header_allowed("x", ""));
}

TEST_CASE("a browser's Basic login carries the token as its password, any user name",
          "[unit][observe][http]") {
  using cohort::observe::basic_password_matches;
  // base64("admin:s3cret"), base64(":s3cret"), base64("x:s3cret") (padded with one '=').
  CHECK(basic_password_matches("Basic YWRtaW46czNjcmV0", "s3cret"));
  CHECK(basic_password_matches("basic OnMzY3JldA==", "s3cret"));
  CHECK(basic_password_matches("BASIC eDpzM2NyZXQ=", "s3cret"));
  CHECK(basic_password_matches("Basic eDpzM2NyZXQ", "s3cret"));  // padding left out
  CHECK_FALSE(basic_password_matches("Basic YWRtaW46czNjcmV0", "s3creT"));
  CHECK_FALSE(basic_password_matches("Basic czNjcmV0", "s3cret"));  // "s3cret": no user part
  CHECK_FALSE(basic_password_matches("Basic YWRtaW46czNjcmV0!", "s3cret"));  // not base64
  CHECK_FALSE(basic_password_matches("Basic YWRtaW46czNjcmV0===", "s3cret"));
  CHECK_FALSE(basic_password_matches("Bearer s3cret", "s3cret"));
  CHECK_FALSE(basic_password_matches("Basic ", "s3cret"));
  CHECK_FALSE(basic_password_matches("", "s3cret"));
  // The password is everything after the first ':' (a token may hold one).
  CHECK(basic_password_matches("Basic dTphOmI=", "a:b"));  // "u:a:b"
}
