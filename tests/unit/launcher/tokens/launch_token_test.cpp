#include "launcher/tokens/launch_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using namespace cohort;
using namespace std::chrono_literals;

namespace {

// A pipe whose write end the test holds, as the launcher holds ssh's stdin.
struct TestPipe {
  TestPipe() { REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  ~TestPipe() {
    close_write();
    ::close(fds[0]);
  }
  void write(const std::string& text) const {
    REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  void close_write() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
  int read_end() const { return fds[0]; }
  int fds[2] = {-1, -1};
};

std::string without_newline(std::string line) {
  REQUIRE(line.back() == '\n');
  line.pop_back();
  return line;
}

}  // namespace

TEST_CASE("a token line carries any token's bytes in hex, and reads back the same",
          "[unit][launcher][auth]") {
  std::string token = "a token with spaces,\nnewlines and \xff bytes";
  std::string line = token_line(token);
  CHECK(line.rfind("token 6120746f6b656e2077697468", 0) == 0);
  CHECK(line.find('\n') == line.size() - 1);
  TokenResult parsed = parse_token_line(without_newline(line));
  CHECK(parsed.error.empty());
  CHECK(parsed.token == token);
  CHECK(token_line("") == "token none\n");
  TokenResult none = parse_token_line("token none");
  CHECK(none.error.empty());
  CHECK(none.token.empty());
}

TEST_CASE("a line that is not a token line is an error naming --under-launch",
          "[unit][launcher][auth]") {
  CHECK(parse_token_line("hello").error ==
        "--under-launch: the first line on stdin is not 'token HEX' (cohort launch writes it)");
  CHECK(parse_token_line("").error.find("is not 'token HEX'") != std::string::npos);
  CHECK(parse_token_line("token 0g").error ==
        "--under-launch: the token line on stdin is not lowercase hex");
  CHECK(parse_token_line("token 123").error.find("not lowercase hex") != std::string::npos);
  CHECK(parse_token_line("token ABCD").error.find("not lowercase hex") != std::string::npos);
  CHECK(parse_token_line("token 6162").error ==
        "--under-launch: the token on stdin has 2 bytes; 16 to 4096 are needed");
  CHECK(parse_token_line("token " + std::string(2 * 4097, 'a')).error.find("4097 bytes") !=
        std::string::npos);
}

TEST_CASE("the launch's token: the user's as is, else generated when it hosts the daemon",
          "[unit][launcher][auth]") {
  test::TempDir dir;
  std::string path = dir.file("token");
  std::ofstream(path) << "user-token-0123456789\n";
  ::chmod(path.c_str(), 0600);
  CHECK(launch_token(path, {{"COHORT_TOKEN", "not-this-one-0123456789"}}, true).token ==
        "user-token-0123456789");
  CHECK(launch_token("", {{"COHORT_TOKEN", "from-env-0123456789"}}, false).token ==
        "from-env-0123456789");
  CHECK(launch_token("", {{"COHORT_TOKEN", "short"}}, true).error.find("COHORT_TOKEN") == 0);

  TokenResult first = launch_token("", {}, true);
  TokenResult second = launch_token("", {}, true);
  CHECK(first.error.empty());
  CHECK(first.token.size() == 64);
  CHECK(first.token.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(first.token != second.token);

  TokenResult external = launch_token("", {}, false);  // a running cohortd's token is the user's
  CHECK(external.token.empty());
  CHECK(external.error.empty());
}

TEST_CASE("reading the token line takes the first line only and leaves the rest of stdin",
          "[unit][launcher][auth]") {
  TestPipe pipe;
  std::string token(20, 'k');
  pipe.write(token_line(token) + "more");
  TokenResult read = read_token_line(pipe.read_end(), 1s);
  CHECK(read.error.empty());
  CHECK(read.token == token);
  char rest[8] = {};
  CHECK(::read(pipe.read_end(), rest, sizeof rest) == 4);
  CHECK(std::string(rest) == "more");
}

TEST_CASE("reading the token line waits for it, and says when it does not come",
          "[unit][launcher][auth]") {
  TestPipe pipe;
  SECTION("in pieces") {
    std::string line = token_line(std::string(16, 'p'));
    pipe.write(line.substr(0, 10));
    pipe.write(line.substr(10));
    CHECK(read_token_line(pipe.read_end(), 1s).token == std::string(16, 'p'));
  }
  SECTION("nothing within the limit") {
    auto start = std::chrono::steady_clock::now();
    CHECK(read_token_line(pipe.read_end(), 100ms).error ==
          "--under-launch: no token line on stdin within 100 ms (this flag is cohort launch's "
          "own)");
    CHECK(std::chrono::steady_clock::now() - start < 2s);
  }
  SECTION("the end of stdin first") {
    pipe.write("token 61");
    pipe.close_write();
    CHECK(read_token_line(pipe.read_end(), 1s).error ==
          "--under-launch: stdin ended before the token line (cohort launch writes it)");
  }
  SECTION("a line without end") {
    pipe.write(std::string(9000, 'a'));
    CHECK(read_token_line(pipe.read_end(), 1s).error ==
          "--under-launch: the token line on stdin is longer than 8199 bytes");
  }
  SECTION("not a token line") {
    pipe.write("hello\n");
    CHECK(read_token_line(pipe.read_end(), 1s).error.find("is not 'token HEX'") !=
          std::string::npos);
  }
}

TEST_CASE("a launched agent's ready line names its version", "[unit][auth]") {
  CHECK(ready_line("cohort 0.1.0 (commit abc)") == "cohort-ready cohort 0.1.0 (commit abc)\n");
  CHECK(ready_line("v").rfind(kReadyPrefix, 0) == 0);
}

TEST_CASE("variables whose names say they hold secrets are told apart", "[unit][launcher][auth]") {
  for (const char* name :
       {"HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "DB_PASSWORD",
        "my_passwd", "GOOGLE_APPLICATION_CREDENTIALS", "hf_token"}) {
    INFO(name);
    CHECK(secret_variable_name(name));
  }
  for (const char* name :
       {"NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "HF_HOME", "PET_NNODES",
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "OMP_NUM_THREADS"}) {
    INFO(name);
    CHECK_FALSE(secret_variable_name(name));
  }
}

TEST_CASE("a secrets line carries any value in hex and reads back the same",
          "[unit][launcher][auth]") {
  SecretVariables secrets{{"HF_TOKEN", "hf_abc"}, {"ODD_KEY", "a b=c\nd \xff"}, {"EMPTY_KEY", ""}};
  std::string line = secrets_line(secrets);
  CHECK(line.rfind("env HF_TOKEN=68665f616263 ", 0) == 0);
  CHECK(line.find('\n') == line.size() - 1);
  SecretsResult parsed = parse_secrets_line(without_newline(line));
  CHECK(parsed.error.empty());
  CHECK(parsed.variables == secrets);
  CHECK(secrets_line({}) == "env\n");
  CHECK(parse_secrets_line("env").variables.empty());
  CHECK(parse_secrets_line("env").error.empty());
  // What cohort launch never writes is refused, naming the flag.
  CHECK(parse_secrets_line("token 00").error.find("--under-launch: the second line on stdin") == 0);
  for (const char* bad : {"env A", "env A=0g", "env 1A=00", "env A-B=00", "env =00", "env A=123"}) {
    INFO(bad);
    CHECK(parse_secrets_line(bad).error ==
          "--under-launch: the secrets line on stdin has a word that is not NAME=HEX");
  }
}

TEST_CASE("the secrets line is read after the token line, and the rest of stdin is left",
          "[unit][launcher][auth]") {
  TestPipe pipe;
  std::string token(20, 'k');
  pipe.write(token_line(token) + secrets_line({{"WANDB_API_KEY", "w"}}) + "more");
  CHECK(read_token_line(pipe.read_end(), 1s).token == token);
  SecretsResult secrets = read_secrets_line(pipe.read_end(), 1s);
  CHECK(secrets.error.empty());
  CHECK(secrets.variables == SecretVariables{{"WANDB_API_KEY", "w"}});
  char rest[8] = {};
  CHECK(::read(pipe.read_end(), rest, sizeof rest) == 4);
  CHECK(std::string(rest) == "more");
  pipe.close_write();
  CHECK(read_secrets_line(pipe.read_end(), 1s).error ==
        "--under-launch: stdin ended before the secrets line (cohort launch writes it)");
}

TEST_CASE("a secrets line past its bound, or one that never ends, is refused in time",
          "[unit][launcher][auth]") {
  TestPipe pipe;
  SECTION("longer than the bound") {
    pipe.write("env A=" + std::string(kMaxSecretsLineBytes, '0'));
    CHECK(read_secrets_line(pipe.read_end(), 1s).error ==
          "--under-launch: the secrets line on stdin is longer than 32768 bytes");
  }
  SECTION("a trickle without a newline: the deadline is not moved by what comes") {
    pipe.write("env A=00");
    auto start = std::chrono::steady_clock::now();
    CHECK(read_secrets_line(pipe.read_end(), 200ms).error ==
          "--under-launch: no secrets line on stdin within 200 ms (this flag is cohort launch's "
          "own)");
    CHECK(std::chrono::steady_clock::now() - start < 2s);
  }
}
