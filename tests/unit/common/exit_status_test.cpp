#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include "common/exit_status.hpp"
#include "common/signal_names.hpp"
#include "common/text.hpp"

using namespace cohort;

TEST_CASE("wait statuses map to shell exit codes", "[unit][common]") {
  CHECK(ExitStatus::from_wait_status(7 << 8) == ExitStatus::exited(7));
  CHECK(ExitStatus::from_wait_status(SIGSEGV) == ExitStatus::killed_by(SIGSEGV));
  CHECK(ExitStatus::exited(7).shell_code() == 7);
  CHECK(ExitStatus::killed_by(SIGSEGV).shell_code() == 139);
  CHECK(ExitStatus::killed_by(SIGKILL).describe() == "signal 9 (SIGKILL)");
  CHECK(ExitStatus::exited(0).success());
  CHECK_FALSE(ExitStatus::killed_by(SIGTERM).success());
}

TEST_CASE("signal names parse in every spelling", "[unit][common]") {
  CHECK(parse_signal("SIGUSR1") == SIGUSR1);
  CHECK(parse_signal("usr2") == SIGUSR2);
  CHECK(parse_signal("15") == SIGTERM);
  CHECK_FALSE(parse_signal("SIGNOPE").has_value());
  CHECK_FALSE(parse_signal("0").has_value());
  CHECK_FALSE(parse_signal("99").has_value());
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(is_termination_signal(SIGHUP));
  CHECK_FALSE(is_termination_signal(SIGUSR1));
}

TEST_CASE("text helpers", "[unit][common]") {
  CHECK(split("a,,b", ',') == std::vector<std::string>{"a", "", "b"});
  CHECK(trim("  x y \n") == "x y");
  CHECK(parse_int("42") == 42);
  CHECK(parse_int("+3") == 3);
  CHECK(parse_int("-3") == -3);
  CHECK_FALSE(parse_int("4x").has_value());
  CHECK_FALSE(parse_int("").has_value());
  CHECK_FALSE(parse_int("99999999999999999999").has_value());
  CHECK(parse_double("0.5") == 0.5);
  CHECK_FALSE(parse_double("abc").has_value());
  CHECK(substitute("--out=${local_rank}/${local_rank}", "local_rank", "3") == "--out=3/3");
}

TEST_CASE("script arguments are expanded as torchrun's string.Template does", "[unit][common]") {
  // What Python's Template(arg).safe_substitute(local_rank="3") gives for each.
  std::vector<std::pair<std::string, std::string>> cases = {
      {"$local_rank", "3"},
      {"out_$local_rank", "out_3"},
      {"${local_rank}", "3"},
      {"a$$b", "a$b"},
      {"$$local_rank", "$local_rank"},
      {"$local_rank_x", "$local_rank_x"},  // another name
      {"$LOCAL_RANK", "$LOCAL_RANK"},
      {"${local_rank", "${local_rank"},
      {"$", "$"},
      {"x$", "x$"},
      {"$HOME/$local_rank.log", "$HOME/3.log"},
      {"${other}$9$local_rank", "${other}$93"},
  };
  for (const auto& [arg, expanded] : cases) {
    INFO(arg);
    CHECK(substitute(arg, "local_rank", "3") == expanded);
  }
}
