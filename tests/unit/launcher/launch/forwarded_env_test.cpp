#include "launcher/launch/forwarded_env.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("the usual prefixes travel, CUDA_VISIBLE_DEVICES and the rest do not",
          "[unit][forwarded_env]") {
  EnvVars local{{"NCCL_DEBUG", "INFO"},   {"GLOO_SOCKET_IFNAME", "eth0"},
                {"CUDA_HOME", "/cuda"},   {"CUDA_VISIBLE_DEVICES", "0"},
                {"PYTHONPATH", "/src"},   {"TORCH_LOGS", "+dynamo"},
                {"OMP_NUM_THREADS", "4"}, {"HOME", "/root"},
                {"PATH", "/bin"},         {"LD_LIBRARY_PATH", "/x"},
                {"HF_HOME", "/hf"},       {"FI_PROVIDER", "efa"}};
  ForwardedEnv env = forwarded_env(local, "", "", {});
  CHECK(env.problems.empty());
  CHECK(env.vars == EnvVars{{"NCCL_DEBUG", "INFO"},
                            {"GLOO_SOCKET_IFNAME", "eth0"},
                            {"CUDA_HOME", "/cuda"},
                            {"PYTHONPATH", "/src"},
                            {"TORCH_LOGS", "+dynamo"},
                            {"OMP_NUM_THREADS", "4"},
                            {"HF_HOME", "/hf"},
                            {"FI_PROVIDER", "efa"}});
}

TEST_CASE("env file, then -x: later sources win", "[unit][forwarded_env]") {
  EnvVars local{{"NCCL_DEBUG", "INFO"}, {"SECRET", "s3"}};
  std::string file =
      "# comment\n\nNCCL_DEBUG=WARN\nexport A=\"quoted value\"\nB='single'\nC=x=y\nD=\n";
  ForwardedEnv env = forwarded_env(local, file, ".cohort_env", {"SECRET", "A=from -x", "E=1 2"});
  CHECK(env.problems.empty());
  CHECK(env.vars == EnvVars{{"NCCL_DEBUG", "WARN"},
                            {"A", "from -x"},
                            {"B", "single"},
                            {"C", "x=y"},
                            {"D", ""},
                            {"SECRET", "s3"},
                            {"E", "1 2"}});
}

TEST_CASE("env file values are read as a shell reads a word: comments, quotes, no expansion",
          "[unit][forwarded_env]") {
  std::string file =
      "A=1 # the first\nB=\"x y\"  # quoted\nC='#not a comment'\nD=a#b\nexport\tE=2\n"
      "F=$HOME/bin\nG=\"it's\"\nH=  spaced  \t# note\nexported=3\n";
  ForwardedEnv env = forwarded_env({}, file, "env", {});
  CHECK(env.problems.empty());
  CHECK(env.vars == EnvVars{{"A", "1"},
                            {"B", "x y"},
                            {"C", "#not a comment"},
                            {"D", "a#b"},
                            {"E", "2"},
                            {"F", "$HOME/bin"},
                            {"G", "it's"},
                            {"H", "spaced"},
                            {"exported", "3"}});
  CHECK(forwarded_env({}, "A=\"open\nB='x' y\nC=ok\n", "env", {}).problems ==
        std::vector<std::string>{"env:1: A: no closing \"", "env:2: B: 'y' after the closing '"});
}

TEST_CASE("bad env-file lines and -x values are named", "[unit][forwarded_env]") {
  ForwardedEnv env =
      forwarded_env({}, "GOOD=1\nno equals sign\n1BAD=2\n", "env", {"UNSET_HERE", "bad-name=1"});
  CHECK(env.problems ==
        std::vector<std::string>{"env:2: expected NAME=value, got 'no equals sign'",
                                 "env:3: expected NAME=value, got '1BAD=2'",
                                 "-x UNSET_HERE: not set here (use -x UNSET_HERE=value)",
                                 "-x: expected NAME or NAME=value, got 'bad-name=1'"});
  CHECK(env.vars == EnvVars{{"GOOD", "1"}});
}
