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
