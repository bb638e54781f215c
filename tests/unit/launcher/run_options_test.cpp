#include "launcher/run_options.hpp"

#include <catch2/catch.hpp>

#include "tests/support/env_guard.hpp"

using namespace cohort;

namespace {

struct Parsed {
  RunOptions options;
  std::string command_error;
};

Parsed parse(std::vector<std::string> args) {
  Parsed parsed;
  CLI::App app;
  add_run_flags(app, parsed.options);
  args.insert(args.begin(), "run");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  parsed.command_error = take_command(app.remaining(), parsed.options);
  return parsed;
}

}  // namespace

TEST_CASE("both spellings of a flag work", "[unit][launcher]") {
  CHECK(parse({"--nproc-per-node", "3", "train.py"}).options.nproc_per_node == "3");
  CHECK(parse({"--nproc_per_node=4", "train.py"}).options.nproc_per_node == "4");
  CHECK(parse({"--max_restarts", "2", "train.py"}).options.max_restarts == 2);
}

TEST_CASE("the script and its arguments are taken as given", "[unit][launcher]") {
  Parsed parsed = parse({"--nproc-per-node", "2", "train.py", "--lr", "0.1", "--nnodes", "9"});
  CHECK(parsed.command_error.empty());
  CHECK(parsed.options.command ==
        std::vector<std::string>{"train.py", "--lr", "0.1", "--nnodes", "9"});
  CHECK(parsed.options.nnodes == "1:1");  // the script's --nnodes is not cohort's
}

TEST_CASE("PET_ variables give defaults that flags override", "[unit][launcher]") {
  test::EnvGuard env;
  env.set("PET_NPROC_PER_NODE", "5");
  env.set("PET_STANDALONE", "1");
  CHECK(parse({"train.py"}).options.nproc_per_node == "5");
  CHECK(parse({"train.py"}).options.standalone);
  CHECK(parse({"--nproc-per-node", "2", "train.py"}).options.nproc_per_node == "2");
  env.set("PET_STANDALONE", "0");
  CHECK_FALSE(parse({"train.py"}).options.standalone);
}

TEST_CASE("unknown flags and a missing script are errors", "[unit][launcher]") {
  CHECK(parse({"--bogus", "t.py"}).command_error.find("--bogus") != std::string::npos);
  CHECK(parse({}).command_error.find("missing the training script") != std::string::npos);
  CHECK(parse({"--", "-weird-name.py"}).command_error.empty());
}

TEST_CASE("cohort's own log level: -q, -v, -vv", "[unit][launcher]") {
  test::EnvGuard env;
  env.unset("LOGLEVEL");
  CHECK(log_level_for(parse({"t.py"}).options) == log::Level::Warn);
  CHECK(log_level_for(parse({"-q", "t.py"}).options) == log::Level::Error);
  CHECK(log_level_for(parse({"-v", "t.py"}).options) == log::Level::Info);
  CHECK(log_level_for(parse({"-vv", "t.py"}).options) == log::Level::Debug);
  env.set("LOGLEVEL", "ERROR");
  CHECK(log_level_for(parse({"t.py"}).options) == log::Level::Error);
  CHECK(log_level_for(parse({"-v", "t.py"}).options) == log::Level::Info);
}
