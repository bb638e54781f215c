#include <catch2/catch.hpp>

#include "agent/output_config.hpp"
#include "agent/torch_probe.hpp"
#include "agent/worker_env.hpp"

using namespace cohort;

TEST_CASE("worker variables follow torchrun", "[unit][agent]") {
  WorkerEnvSettings settings{"trainer", 4, 3, "job42", "SIGTERM"};
  RoundInfo round{2, 1, 2, 4, 12, "10.0.0.1", 29501, true};
  EnvMap agent_env{{"PATH", "/bin"}};
  EnvMap vars = worker_variables(settings, round, 3, "/logs/error.json", agent_env);
  CHECK(vars["LOCAL_RANK"] == "3");
  CHECK(vars["RANK"] == "7");
  CHECK(vars["GROUP_RANK"] == "1");
  CHECK(vars["ROLE_RANK"] == "7");
  CHECK(vars["ROLE_NAME"] == "trainer");
  CHECK(vars["LOCAL_WORLD_SIZE"] == "4");
  CHECK(vars["WORLD_SIZE"] == "12");
  CHECK(vars["GROUP_WORLD_SIZE"] == "2");
  CHECK(vars["ROLE_WORLD_SIZE"] == "12");
  CHECK(vars["MASTER_ADDR"] == "10.0.0.1");
  CHECK(vars["MASTER_PORT"] == "29501");
  CHECK(vars["TORCHELASTIC_RESTART_COUNT"] == "2");
  CHECK(vars["TORCHELASTIC_MAX_RESTARTS"] == "3");
  CHECK(vars["TORCHELASTIC_RUN_ID"] == "job42");
  CHECK(vars["TORCHELASTIC_USE_AGENT_STORE"] == "True");
  CHECK(vars["TORCHELASTIC_ERROR_FILE"] == "/logs/error.json");
  CHECK(vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1");
  CHECK(vars["OMP_NUM_THREADS"] == "1");
  CHECK(vars.count("PATH") == 0);
}

TEST_CASE("OMP_NUM_THREADS and NCCL settings of the user are kept", "[unit][agent]") {
  WorkerEnvSettings settings{"default", 2, 0, "none", ""};
  RoundInfo round;
  EnvMap agent_env{{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}};
  EnvMap vars = worker_variables(settings, round, 0, "", agent_env);
  CHECK(vars.count("OMP_NUM_THREADS") == 0);
  CHECK(vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "0");
  std::vector<std::string> merged = merge_env(agent_env, vars);
  CHECK(std::count(merged.begin(), merged.end(), "OMP_NUM_THREADS=8") == 1);
  CHECK(std::count(merged.begin(), merged.end(), "TORCH_NCCL_ASYNC_ERROR_HANDLING=0") == 1);
}

TEST_CASE("NCCL async error handling under the names the workers' torch reads", "[unit][agent]") {
  // PyTorch 2.x: only the new name (2.x warns about the old one); 1.x: the old one too.
  CHECK(async_error_handling(2, {}) == EnvMap{{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}});
  CHECK(async_error_handling(3, {}) == EnvMap{{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}});
  const EnvMap both{{"NCCL_ASYNC_ERROR_HANDLING", "1"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}};
  CHECK(async_error_handling(1, {}) == both);
  CHECK(async_error_handling(std::nullopt, {}) == both);  // unknown: both, as before
  // What the user set, under either name, is passed on as it is.
  CHECK(async_error_handling(2, {{"NCCL_ASYNC_ERROR_HANDLING", "0"}}) ==
        EnvMap{{"NCCL_ASYNC_ERROR_HANDLING", "0"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}});
  CHECK(async_error_handling(1, {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}) ==
        EnvMap{{"NCCL_ASYNC_ERROR_HANDLING", "1"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}});
  // And so in every worker's variables.
  WorkerEnvSettings settings{"default", 1, 0, "none", ""};
  settings.torch_major = 2;
  EnvMap vars = worker_variables(settings, RoundInfo{}, 0, "", {});
  CHECK(vars.count("NCCL_ASYNC_ERROR_HANDLING") == 0);
  settings.torch_major = 1;
  CHECK(worker_variables(settings, RoundInfo{}, 0, "", {})["NCCL_ASYNC_ERROR_HANDLING"] == "1");
}

TEST_CASE("the torch version the probe printed", "[unit][agent]") {
  auto version = [](const std::string& printed) {
    std::optional<TorchVersion> parsed = parse_torch_version(printed);
    return parsed ? std::to_string(parsed->major) + "." + std::to_string(parsed->minor) : "none";
  };
  CHECK(version("2.6.0+debian\n") == "2.6");
  CHECK(version("1.13.0a0+gitunknown\n") == "1.13");
  CHECK(version("2.11.0\n") == "2.11");
  CHECK(version("10.0\n") == "10.0");
  CHECK(version("2.9") == "2.9");
  CHECK(version("") == "none");
  CHECK(version("torch\n") == "none");
  CHECK(version("2") == "none");
  CHECK(version("2.") == "none");
  CHECK(version("2.x") == "none");
  CHECK(version("123456.0") == "none");
  CHECK(version("2.123456") == "none");
}

TEST_CASE("a single worker gets no OMP_NUM_THREADS", "[unit][agent]") {
  WorkerEnvSettings settings{"default", 1, 0, "none", ""};
  EnvMap vars = worker_variables(settings, RoundInfo{}, 0, "", {});
  CHECK(vars.count("OMP_NUM_THREADS") == 0);
}

TEST_CASE("redirect and tee values parse like torchrun's", "[unit][agent]") {
  CHECK(StdSpec::parse("3")->for_rank(5) == 3);
  auto per_rank = StdSpec::parse("0:1,1:2");
  REQUIRE(per_rank);
  CHECK(per_rank->for_rank(0) == 1);
  CHECK(per_rank->for_rank(1) == 2);
  CHECK(per_rank->for_rank(2) == 0);
  CHECK_FALSE(StdSpec::parse("4"));
  CHECK_FALSE(StdSpec::parse("x"));
  CHECK_FALSE(StdSpec::parse("0:1,1"));
  CHECK_FALSE(StdSpec::parse("-1:1"));
}

TEST_CASE("streams are routed to files and the console", "[unit][agent]") {
  OutputConfig config;
  CHECK(route_stream(config, 0, kStdout).console);
  CHECK_FALSE(route_stream(config, 0, kStdout).file);
  config.redirects = *StdSpec::parse("1");
  CHECK(route_stream(config, 0, kStdout).file);
  CHECK_FALSE(route_stream(config, 0, kStdout).console);
  CHECK(route_stream(config, 0, kStderr).console);
  config.tee = *StdSpec::parse("1");
  CHECK(route_stream(config, 0, kStdout).console);
  CHECK(route_stream(config, 0, kStdout).file);
  config.console_ranks = {1};
  CHECK_FALSE(route_stream(config, 0, kStderr).console);
  CHECK(route_stream(config, 1, kStderr).console);
}

TEST_CASE("line prefixes come from the template", "[unit][agent]") {
  CHECK(line_prefix("[${role_name}${local_rank}]:", "default", 3, 11, "h") == "[default3]:");
  CHECK(line_prefix("${rank}|${local_rank} ", "r", 1, 9, "h") == "9|1 ");
  CHECK(line_prefix("${hostname}:${rank}:", "r", 1, 9, "node4") == "node4:9:");
  // ${pid} is the worker's: the output pump fills it in once the worker runs.
  CHECK(line_prefix("[${pid}]", "r", 1, 9, "node4") == "[${pid}]");
}

TEST_CASE("flag --duplicate-*-filters lists: commas split, ',,' is a comma", "[unit][agent]") {
  CHECK(parse_filter_list("apple,orange") == std::vector<std::string>{"apple", "orange"});
  CHECK(parse_filter_list("a,,b,c") == std::vector<std::string>{"a,b", "c"});
  CHECK(parse_filter_list("").empty());
  CHECK(parse_filter_list("loss,") == std::vector<std::string>{"loss"});
}

TEST_CASE("flag --virtual-local-rank: LOCAL_RANK=0 and one device per worker", "[unit][agent]") {
  WorkerEnvSettings settings{"default", 2, 0, "none", ""};
  settings.virtual_local_rank = true;
  RoundInfo round;
  round.base_rank = 4;
  SECTION("no CUDA_VISIBLE_DEVICES: the local rank's own device") {
    EnvMap vars = worker_variables(settings, round, 1, "", {});
    CHECK(vars["LOCAL_RANK"] == "0");
    CHECK(vars["RANK"] == "5");
    CHECK(vars["CUDA_VISIBLE_DEVICES"] == "1");
  }
  SECTION("through the agent's CUDA_VISIBLE_DEVICES") {
    EnvMap agent_env{{"CUDA_VISIBLE_DEVICES", "3, 6"}};
    CHECK(worker_variables(settings, round, 0, "", agent_env)["CUDA_VISIBLE_DEVICES"] == "3");
    CHECK(worker_variables(settings, round, 1, "", agent_env)["CUDA_VISIBLE_DEVICES"] == "6");
    CHECK(virtual_visible_device(agent_env, 2).empty());
  }
  SECTION("off: LOCAL_RANK is the local rank and CUDA_VISIBLE_DEVICES is inherited") {
    settings.virtual_local_rank = false;
    EnvMap vars = worker_variables(settings, round, 1, "", {{"CUDA_VISIBLE_DEVICES", "3,6"}});
    CHECK(vars["LOCAL_RANK"] == "1");
    CHECK(vars.count("CUDA_VISIBLE_DEVICES") == 0);
  }
}
