#include "launcher/cli/doctor_command.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace cohort;

TEST_CASE("doctor lines: level, name and detail in columns, advice only when not ok",
          "[unit][launcher][doctor]") {
  CHECK(format_check_line({"ssh", CheckLevel::kOk, "/usr/bin/ssh (for cohort launch)", "x"}) ==
        "ok    ssh                   /usr/bin/ssh (for cohort launch)");
  CHECK(format_check_line({"gpu 1", CheckLevel::kFail, "bad", "reset it"}) ==
        "FAIL  gpu 1                 bad; to fix: reset it");
  CHECK(format_check_line({"torch", CheckLevel::kWarn, "none", ""}) ==
        "warn  torch                 none");
}

TEST_CASE("doctor exits 1 only when a check FAILed, and its JSON counts each level",
          "[unit][launcher][doctor]") {
  std::vector<CheckResult> checks{{"a", CheckLevel::kOk, "fine", ""},
                                  {"b", CheckLevel::kWarn, "meh", "do x"}};
  CHECK(doctor_exit_code(checks) == 0);
  checks.push_back({"c", CheckLevel::kFail, "broken", "do y"});
  CHECK(doctor_exit_code(checks) == 1);
  nlohmann::json parsed = nlohmann::json::parse(checks_json(checks));
  REQUIRE(parsed["checks"].size() == 3);
  CHECK(parsed["checks"][2]["name"] == "c");
  CHECK(parsed["checks"][2]["level"] == "FAIL");
  CHECK(parsed["checks"][2]["advice"] == "do y");
  CHECK(parsed["ok"] == 1);
  CHECK(parsed["warn"] == 1);
  CHECK(parsed["fail"] == 1);
}

TEST_CASE("doctor's JSON stays JSON when a detail quotes bytes that are not UTF-8",
          "[unit][launcher][doctor]") {
  std::vector<CheckResult> checks{
      {"CUDA_VISIBLE_DEVICES", CheckLevel::kWarn, "\"\xff\" hides", ""}};
  nlohmann::json parsed = nlohmann::json::parse(checks_json(checks));
  CHECK(parsed["checks"][0]["detail"] == "\"\xef\xbf\xbd\" hides");  // U+FFFD in its place
}

TEST_CASE("doctor's RLIMIT_NOFILE check: the hard limit must cover the ranks' descriptors",
          "[unit][launcher][doctor]") {
  CHECK(descriptors_for_ranks(1024) == 2112);
  CHECK(judge_fd_limit(4096, 4096, 1024, false).level == CheckLevel::kOk);
  CheckResult raised = judge_fd_limit(1024, 4096, 1024, false);
  CHECK(raised.level == CheckLevel::kOk);
  CHECK(raised.detail.find("cohortd raises its soft limit") != std::string::npos);
  CheckResult short_default = judge_fd_limit(1024, 1024, 1024, false);
  CHECK(short_default.level == CheckLevel::kWarn);
  CHECK(short_default.advice.find("LimitNOFILE=2112") != std::string::npos);
  CHECK(short_default.advice.find("ulimit -Hn 2112") != std::string::npos);
  CHECK(judge_fd_limit(1024, 1024, 1024, true).level == CheckLevel::kFail);
  CHECK(judge_fd_limit(1024, 1024, 100, true).level == CheckLevel::kOk);
  // 1,000,000 ranks need more than the kernel's default fs.nr_open lets any limit be.
  CheckResult past_kernel = judge_fd_limit(1024, 1048576, 1000000, true, 1048576);
  CHECK(past_kernel.level == CheckLevel::kFail);
  CHECK(past_kernel.advice.find("no limit may pass the kernel's fs.nr_open, 1048576 here: first "
                                "`sysctl -w fs.nr_open=2000064`") == 0);
  CHECK(past_kernel.advice.find("ulimit -Hn 2000064") != std::string::npos);
  CHECK(short_default.advice.find("nr_open") == std::string::npos);  // 0: not known
  CHECK(judge_fd_limit(1024, 1024, 1024, false, 1048576).advice.find("nr_open") ==
        std::string::npos);
}

TEST_CASE("doctor's NVML check warns without NVML or without GPUs", "[unit][launcher][doctor]") {
  CheckResult none = judge_nvml(std::nullopt, std::nullopt);
  CHECK(none.level == CheckLevel::kWarn);
  CHECK(none.detail.find("no GPU checks") != std::string::npos);
  CHECK(judge_nvml(std::vector<GpuState>{}, std::string("550.1")).level == CheckLevel::kWarn);
  CheckResult two = judge_nvml(std::vector<GpuState>(2), std::string("550.1"));
  CHECK(two.level == CheckLevel::kOk);
  CHECK(two.detail == "driver 550.1, 2 GPUs");
}

TEST_CASE("doctor's GPU check: ECC errors and pending remaps FAIL, holders and ECC off warn",
          "[unit][launcher][doctor]") {
  GpuState gpu;
  gpu.index = 1;
  gpu.bus_id = "0000:0b:00.0";
  gpu.ecc_enabled = true;
  CheckResult well = judge_gpu(gpu, {});
  CHECK(well.level == CheckLevel::kOk);
  CHECK(well.detail ==
        "0000:0b:00.0, ECC on, no process holds it, no ECC errors, no pending remaps");

  GpuState held = gpu;
  held.processes = {4242, 4243};
  CheckResult busy = judge_gpu(held, {{4242, "python3"}});
  CHECK(busy.level == CheckLevel::kWarn);
  CHECK(busy.detail.find("held by pid 4242 (python3), pid 4243") != std::string::npos);

  GpuState off = gpu;
  off.ecc_enabled = false;
  CHECK(judge_gpu(off, {}).level == CheckLevel::kWarn);
  CHECK(judge_gpu(off, {}).advice.find("nvidia-smi -e 1 -i 1") != std::string::npos);

  GpuState errors = held;
  errors.uncorrected_ecc = 3;
  CheckResult failed = judge_gpu(errors, {});
  CHECK(failed.level == CheckLevel::kFail);
  CHECK(failed.detail.find("3 uncorrectable ECC errors") != std::string::npos);
  CHECK(failed.advice.rfind("drain the node and reset the GPU (nvidia-smi -r -i 1)", 0) == 0);

  GpuState remap = gpu;
  remap.memory_repair_pending = true;
  CHECK(judge_gpu(remap, {}).level == CheckLevel::kFail);
  GpuState no_ecc = gpu;
  no_ecc.ecc_enabled.reset();
  CHECK(judge_gpu(no_ecc, {}).level == CheckLevel::kOk);
  CHECK(judge_gpu(no_ecc, {}).detail.find("no ECC,") != std::string::npos);
}

TEST_CASE("doctor's CUDA_VISIBLE_DEVICES check says what it names and hides",
          "[unit][launcher][doctor]") {
  CHECK(judge_visible_devices(nullptr, 8).detail == "unset: CUDA sees every GPU (8)");
  CHECK(judge_visible_devices(nullptr, std::nullopt).level == CheckLevel::kOk);
  CheckResult named = judge_visible_devices("7,6", 8);
  CHECK(named.level == CheckLevel::kOk);
  CHECK(named.detail == "\"7,6\": names GPUs 7,6 of 8; hides 0-5");
  CHECK(judge_visible_devices("0,2", 4).detail == "\"0,2\": names GPUs 0,2 of 4; hides 1,3");
  CHECK(judge_visible_devices("", 2).level == CheckLevel::kWarn);
  CheckResult cut = judge_visible_devices("0,9,1", 2);
  CHECK(cut.level == CheckLevel::kWarn);
  CHECK(cut.detail.find("stops at entry 2") != std::string::npos);
  CHECK(judge_visible_devices("GPU-6a2f", 2).detail == "\"GPU-6a2f\": 1 GPU by UUID");
  CHECK(judge_visible_devices("0", std::nullopt).level == CheckLevel::kOk);
}

TEST_CASE("doctor's topology check counts sockets, NUMA nodes, cores and places the GPUs",
          "[unit][launcher][doctor]") {
  MachineTopology topology;
  for (int cpu = 0; cpu < 8; ++cpu) topology.pus.push_back({cpu, cpu / 2, -1, cpu / 4, cpu / 4});
  topology.gpus = {{"0000:07:00.0", 0}, {"0000:0b:00.0", 0}, {"0000:48:00.0", 1}};
  CheckResult placed = judge_topology(topology, "");
  CHECK(placed.level == CheckLevel::kOk);
  CHECK(placed.detail ==
        "2 sockets, 2 NUMA nodes, 4 cores, 8 CPUs; GPU 0-1 on NUMA 0, GPU 2 on NUMA 1");
  topology.gpus.push_back({"0000:99:00.0", -1});
  topology.this_machine = false;
  CheckResult lost = judge_topology(topology, "");
  CHECK(lost.level == CheckLevel::kWarn);
  CHECK(lost.detail.find("not this machine") != std::string::npos);
  CHECK(lost.detail.find("GPU 3: NUMA node not found") != std::string::npos);
  CHECK(judge_topology(std::nullopt, "no hwloc").level == CheckLevel::kWarn);
}

TEST_CASE("doctor's cgroup, torch and tool checks", "[unit][launcher][doctor]") {
  CHECK(judge_cgroups(true, "/a.slice", "").level == CheckLevel::kOk);
  CheckResult fallback = judge_cgroups(false, "/a.slice", "COHORT_NO_CGROUP is set");
  CHECK(fallback.level == CheckLevel::kWarn);
  CHECK(fallback.detail.find("subreaper") != std::string::npos);
  CHECK(fallback.advice == "unset COHORT_NO_CGROUP");

  CHECK(judge_torch({"python3", "", false, ""}).detail == "python3 not found on PATH");
  CHECK(judge_torch({"python3", "/usr/bin/python3", false, "\n"}).detail ==
        "/usr/bin/python3 has no torch");
  CHECK(judge_torch({"python3", "/usr/bin/python3", true, ""}).level == CheckLevel::kWarn);
  CheckResult torch = judge_torch({"python3", "/usr/bin/python3", false, "2.6.0+debian\n"});
  CHECK(torch.level == CheckLevel::kOk);
  CHECK(torch.detail == "torch 2.6.0+debian in /usr/bin/python3");

  CHECK(judge_tool("eu-stack", "", false, "native stacks").level == CheckLevel::kWarn);
  CHECK(judge_tool("eu-stack", "", false, "native stacks").advice == "install elfutils");
  CHECK(judge_tool("srun", "", true, "for Slurm").level == CheckLevel::kOk);
  CHECK(judge_tool("srun", "", true, "for Slurm").detail == "not found (only for Slurm)");
  CHECK(judge_tool("ssh", "/usr/bin/ssh", true, "for cohort launch").detail ==
        "/usr/bin/ssh (for cohort launch)");
}

TEST_CASE("doctor's rendezvous check: ok with a status reply, FAIL with why not",
          "[unit][launcher][doctor]") {
  StatusFetch answered;
  answered.reply = proto::StatusReply{};
  CHECK(judge_rendezvous("127.0.0.1:29400", answered, true).detail ==
        "cohort daemon at 127.0.0.1:29400 answers, token accepted, 0 runs");
  StatusFetch refused{std::nullopt, 3,
                      "no status from h:1: authentication failed: the proof does not match"};
  CheckResult failed = judge_rendezvous("h:1", refused, true);
  CHECK(failed.level == CheckLevel::kFail);
  CHECK(failed.advice.find("--token-file") != std::string::npos);
  StatusFetch unreachable{std::nullopt, 3, "cannot reach h:1: Connection refused"};
  CHECK(judge_rendezvous("h:1", unreachable, false).level == CheckLevel::kFail);
  CHECK(judge_rendezvous("h:1", unreachable, false).advice.find("reachable") != std::string::npos);
  StatusFetch stranger{std::nullopt, 3, "no status from h:1: no challenge from h:1: unexpected"};
  CHECK(judge_rendezvous("h:1", stranger, false).advice.find("control port") != std::string::npos);
}
