#include "launcher/tokens/slurm_token.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.hpp"

using namespace cohort;

TEST_CASE("a Slurm job's token is derived from a private per-user secret and the job id",
          "[unit][launcher][auth]") {
  test::TempDir home;
  TokenResult first = slurm_job_token({{"SLURM_JOB_ID", "42"}, {"HOME", home.path()}});
  REQUIRE(first.error.empty());
  CHECK(first.token.size() == 64);
  struct stat info {};
  REQUIRE(::stat(home.file(".cohort/secret").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  // Every node of the job (same home) derives the same token; another job another one.
  CHECK(slurm_job_token({{"SLURM_JOB_ID", "42"}, {"HOME", home.path()}}).token == first.token);
  CHECK(slurm_job_token({{"SLURM_JOB_ID", "43"}, {"HOME", home.path()}}).token != first.token);
}

TEST_CASE("outside Slurm there is no derived token, a shared secret file is refused",
          "[unit][launcher][auth]") {
  test::TempDir home;
  TokenResult outside = slurm_job_token({{"HOME", home.path()}});
  CHECK(outside.token.empty());
  CHECK(outside.error.empty());
  REQUIRE(slurm_job_token({{"SLURM_JOB_ID", "1"}, {"HOME", home.path()}}).error.empty());
  ::chmod(home.file(".cohort/secret").c_str(), 0644);
  CHECK(slurm_job_token({{"SLURM_JOB_ID", "1"}, {"HOME", home.path()}})
            .error.find("readable by others") != std::string::npos);
}
