// The environment of a Python worker whose torch is PyTorch 2.6 (Debian 13's, inside the root
// scripts/in-torch2 enters): NCCL's async error handling under the name 2.x reads only, so that
// PyTorch prints no deprecation warning; cohort reads the version from the interpreter's package
// metadata before the first round. With --hang-timeout, the flight recorder's dump stem goes
// under TORCH_NCCL_DEBUG_INFO_TEMP_FILE, the one name 2.6 reads (2.9 on read and prefer
// TORCH_FR_DUMP_TEMP_FILE, and warn about the older name).
#include <fstream>

#include "tests/torch2/torch2_support.hpp"

using namespace cohort::test;

TEST_CASE(
    "a PyTorch 2.6 Python worker gets only TORCH_NCCL_ASYNC_ERROR_HANDLING and the older dump name",
    "[torch2][compat]") {
  require_torch2();
  Scratch scratch;
  std::string script = scratch.file("dump_env.py");
  std::ofstream(script) << "import json, os, sys\n"
                           "json.dump(dict(os.environ), open(sys.argv[1], 'w'))\n";
  RunResult result = scratch.run_argv(
      in_torch2(Scratch::cohort_argv({"--standalone", "--nproc-per-node", "2", "--hang-timeout",
                                      "60", "--log-dir", scratch.file("logs"), script,
                                      scratch.file("env_${local_rank}.json")})),
      scratch.options(torch2_env()), 120s);
  INFO(result.out << result.err);
  REQUIRE(result.status.shell_code() == 0);
  for (const char* rank : {"0", "1"}) {
    EnvDump env = load_env(scratch.file(std::string("env_") + rank + ".json"));
    CHECK(env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(env_value(env, "NCCL_ASYNC_ERROR_HANDLING") == "<unset>");
    CHECK(
        contains(env_value(env, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), "/attempt_0/nccl_trace_rank_"));
    CHECK(env_value(env, "TORCH_FR_DUMP_TEMP_FILE") == "<unset>");
  }
  CHECK(scratch.nothing_left());
}
