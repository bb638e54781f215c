// `cohort doctor` as an admin runs it: the NVML test double's GPUs (well, then with ECC errors
// and a pending remap), the 2-socket 8-GPU topology (HWLOC_XMLFILE), a stand-in Python that
// reports a torch, a real cohortd on 127.0.0.1 proving the right and a wrong token, --json, the
// flags' errors and the exit codes.
#include <sys/stat.h>

#include "proto/auth.hpp"
#include "tests/integration/multinode_support.hpp"

using namespace cohort::test;

namespace {

// The machine the doctor sees: two GPUs of the NVML double (`state`: its state file), the
// synthetic topology and a Python whose "torch" is 2.6.0+fake.
std::map<std::string, std::string> fake_node(const Scratch& scratch, const std::string& state) {
  std::string python = scratch.file("python3");
  write_script(python, "echo 2.6.0+fake\n");
  return {{"COHORT_NVML_LIBRARY", kFakeNvmlLibrary},
          {"COHORT_FAKE_NVML_BUS_IDS", "0000:07:00.0,0000:0b:00.0"},
          {"COHORT_FAKE_NVML_STATE", state},
          {"HWLOC_XMLFILE", std::string(kSourceDir) + "/tests/data/two_socket_eight_gpu.xml"},
          {"PYTHON_EXEC", python}};
}

RunResult doctor(const Scratch& scratch, const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{kCohortBin, "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  return scratch.run_argv(argv, scratch.options(env), 30s);
}

// The line of check `name` ("gpu 1"), or "".
std::string line_of(const std::string& out, const std::string& name) {
  for (const std::string& line : split_lines(out)) {
    if (line.size() > 6 && line.compare(6, name.size() + 1, name + " ") == 0) return line;
  }
  return "";
}

}  // namespace

TEST_CASE("cohort doctor on a node with two healthy fake GPUs says ok and exits 0",
          "[integration][doctor]") {
  Scratch scratch;
  std::string state = scratch.file("nvml_state");
  std::ofstream(state) << "";
  std::map<std::string, std::string> env = fake_node(scratch, state);
  env["CUDA_VISIBLE_DEVICES"] = "1";
  RunResult result = doctor(scratch, {}, env);
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(line_of(result.out, "nvml") == "ok    nvml                  driver 550.54.15, 2 GPUs");
  CHECK(line_of(result.out, "gpu 0") ==
        "ok    gpu 0                 0000:07:00.0, ECC on, no process holds it, no ECC errors, "
        "no pending remaps");
  CHECK(contains(line_of(result.out, "gpu 1"), "ok    gpu 1                 0000:0b:00.0"));
  CHECK(line_of(result.out, "CUDA_VISIBLE_DEVICES") ==
        "ok    CUDA_VISIBLE_DEVICES  \"1\": names GPUs 1 of 2; hides 0");
  CHECK(contains(line_of(result.out, "topology"),
                 "ok    topology              2 sockets, 4 NUMA nodes, 32 cores, 64 CPUs; GPU "
                 "0-1 on NUMA 0 (HWLOC_XMLFILE/HWLOC_SYNTHETIC: not this machine)"));
  CHECK(line_of(result.out, "torch") ==
        "ok    torch                 torch 2.6.0+fake in " + scratch.file("python3"));
  CHECK(contains(line_of(result.out, "cgroup"), "cgroup"));
  CHECK(contains(line_of(result.out, "RLIMIT_NOFILE"), "a daemon for 1024 ranks needs 2112"));
  CHECK(!line_of(result.out, "eu-stack").empty());
  CHECK(!line_of(result.out, "ssh").empty());
  CHECK(!line_of(result.out, "srun").empty());
  CHECK(line_of(result.out, "rendezvous").empty());
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohort doctor FAILs a GPU with ECC errors or a pending remap, also in --json",
          "[integration][doctor]") {
  Scratch scratch;
  std::string state = scratch.file("nvml_state");
  std::ofstream(state) << "remap_pending 0\necc 1 3\nprocess 1 " << ::getpid() << "\n";
  RunResult result = doctor(scratch, {}, fake_node(scratch, state));
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 1);
  CHECK(contains(line_of(result.out, "gpu 0"),
                 "FAIL  gpu 0                 0000:07:00.0, ECC on, a row remap or page "
                 "retirement waits for a GPU reset, no process holds it; to fix: drain the node "
                 "and reset the GPU (nvidia-smi -r -i 0)"));
  CHECK(contains(line_of(result.out, "gpu 1"), "3 uncorrectable ECC errors"));
  CHECK(contains(line_of(result.out, "gpu 1"), "held by pid " + std::to_string(::getpid())));

  RunResult json = doctor(scratch, {"--json"}, fake_node(scratch, state));
  INFO(json.out << json.err);
  CHECK(json.status.shell_code() == 1);
  nlohmann::json parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["fail"] == 2);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& check : parsed["checks"]) by_name[check["name"]] = check;
  CHECK(by_name["gpu 1"]["level"] == "FAIL");
  CHECK(contains(by_name["gpu 1"]["advice"].get<std::string>(), "nvidia-smi -r -i 1"));
  CHECK(by_name["nvml"]["level"] == "ok");
  CHECK(by_name["nvml"]["detail"] == "driver 550.54.15, 2 GPUs");
  CHECK(by_name.count("torch") == 1);
}

TEST_CASE("cohort doctor without NVML or torch warns and still exits 0", "[integration][doctor]") {
  Scratch scratch;
  RunResult result = doctor(scratch, {},
                            {{"COHORT_NVML_LIBRARY", scratch.file("no_such_libnvidia-ml.so")},
                             {"PYTHON_EXEC", scratch.file("no_such_python")}});
  INFO(result.out << result.err);
  CHECK(result.status.shell_code() == 0);
  CHECK(contains(line_of(result.out, "nvml"), "warn  nvml"));
  CHECK(contains(line_of(result.out, "nvml"), "no GPU checks"));
  CHECK(line_of(result.out, "gpu 0").empty());
  CHECK(line_of(result.out, "torch") ==
        "warn  torch                 PYTHON_EXEC " + scratch.file("no_such_python") +
            " not found; to fix: install python3 with torch, or point PYTHON_EXEC at the workers' "
            "interpreter (cohort run --no-python needs neither)");
}

TEST_CASE("cohort doctor checks a real cohortd: token accepted, wrong token and no daemon FAIL",
          "[integration][doctor]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.use_token();
  cluster.start_daemon();
  std::string state = scratch.file("nvml_state");
  std::ofstream(state) << "";
  std::map<std::string, std::string> env = fake_node(scratch, state);

  RunResult good = doctor(
      scratch, {"--rdzv-endpoint", cluster.endpoint(), "--token-file", cluster.token_file()}, env);
  INFO(good.out << good.err);
  CHECK(good.status.shell_code() == 0);
  CHECK(line_of(good.out, "rendezvous") == "ok    rendezvous            cohort daemon at " +
                                               cluster.endpoint() +
                                               " answers, token accepted, 0 runs");

  std::string wrong = scratch.file("wrong_token");
  std::ofstream(wrong) << "not-the-cluster-token-0123456789\n";
  ::chmod(wrong.c_str(), 0600);
  RunResult bad =
      doctor(scratch, {"--rdzv-endpoint", cluster.endpoint(), "--token-file", wrong}, env);
  INFO(bad.out << bad.err);
  CHECK(bad.status.shell_code() == 1);
  CHECK(contains(line_of(bad.out, "rendezvous"), "FAIL  rendezvous"));
  CHECK(contains(line_of(bad.out, "rendezvous"), "authentication failed"));
  CHECK(contains(line_of(bad.out, "rendezvous"),
                 "to fix: give the daemon's token, or a run's with its --rdzv-id"));

  // A run's token proves that run only: accepted with its --rdzv-id, refused without.
  std::string cluster_token = read_file(cluster.token_file());
  cluster_token.erase(cluster_token.find_last_not_of('\n') + 1);
  std::string team = scratch.file("team_token");
  std::ofstream(team) << cohort::proto::derive_run_token(cluster_token, "blue") << "\n";
  ::chmod(team.c_str(), 0600);
  RunResult run_token = doctor(
      scratch, {"--rdzv-endpoint", cluster.endpoint(), "--token-file", team, "--rdzv-id", "blue"},
      env);
  INFO(run_token.out << run_token.err);
  CHECK(run_token.status.shell_code() == 0);
  CHECK(contains(line_of(run_token.out, "rendezvous"), "token accepted, 0 runs"));
  RunResult no_id =
      doctor(scratch, {"--rdzv-endpoint", cluster.endpoint(), "--token-file", team}, env);
  CHECK(no_id.status.shell_code() == 1);

  int port = cluster.port();
  REQUIRE(cluster.stop_daemon());
  RunResult gone = doctor(scratch, {"--rdzv-endpoint", "127.0.0.1:" + std::to_string(port)}, env);
  INFO(gone.out << gone.err);
  CHECK(gone.status.shell_code() == 1);
  CHECK(contains(line_of(gone.out, "rendezvous"),
                 "FAIL  rendezvous            no status from 127.0.0.1:"));
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohort doctor's flags: --expect-ranks against the hard limit, each error names its flag",
          "[integration][doctor]") {
  Scratch scratch;
  std::map<std::string, std::string> no_nvml{
      {"COHORT_NVML_LIBRARY", scratch.file("no_such_libnvidia-ml.so")}};
  RunResult many = doctor(scratch, {"--expect-ranks", "1000000"}, no_nvml);
  INFO(many.out << many.err);
  CHECK(many.status.shell_code() == 1);
  CHECK(contains(line_of(many.out, "RLIMIT_NOFILE"), "FAIL  RLIMIT_NOFILE"));
  CHECK(contains(line_of(many.out, "RLIMIT_NOFILE"), "LimitNOFILE=2000064"));

  RunResult zero = doctor(scratch, {"--expect-ranks", "0"}, no_nvml);
  CHECK(zero.status.shell_code() == 2);
  CHECK(contains(zero.err, "cohort doctor: --expect-ranks: expected 1 to 1000000 ranks, got 0"));
  RunResult words = doctor(scratch, {"--expect-ranks", "many"}, no_nvml);
  CHECK(words.status.shell_code() == 2);
  CHECK(contains(words.err, "--expect-ranks"));
  RunResult lone_token = doctor(scratch, {"--token-file", scratch.file("t")}, no_nvml);
  CHECK(lone_token.status.shell_code() == 2);
  CHECK(contains(lone_token.err, "--token-file: only with --rdzv-endpoint"));
  RunResult endpoint = doctor(scratch, {"--rdzv-endpoint", "127.0.0.1:99999"}, no_nvml);
  CHECK(endpoint.status.shell_code() == 2);
  CHECK(contains(endpoint.err, "--rdzv-endpoint: expected host[:port]"));
  RunResult port0 = doctor(scratch, {"--rdzv-endpoint", "127.0.0.1:0"}, no_nvml);
  CHECK(port0.status.shell_code() == 2);
  CHECK(contains(port0.err, "--rdzv-endpoint: expected host[:port] (port 1-65535)"));
  RunResult lone_id = doctor(scratch, {"--rdzv-id", "blue"}, no_nvml);
  CHECK(lone_id.status.shell_code() == 2);
  CHECK(contains(lone_id.err, "--rdzv-id: only with --rdzv-endpoint"));
  RunResult bad_id =
      doctor(scratch, {"--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id", "a/b"}, no_nvml);
  CHECK(bad_id.status.shell_code() == 2);
  CHECK(contains(bad_id.err, "--rdzv-id: "));
  RunResult empty = doctor(scratch, {"--rdzv-endpoint", ""}, no_nvml);
  CHECK(empty.status.shell_code() == 2);
  CHECK(contains(empty.err, "--rdzv-endpoint: expected a value, got ''"));
  RunResult unknown = doctor(scratch, {"--gpus"}, no_nvml);
  CHECK(unknown.status.shell_code() == 2);
  CHECK(contains(unknown.err, "cohort doctor"));
  RunResult help = doctor(scratch, {"--help"}, no_nvml);
  CHECK(help.status.shell_code() == 0);
  for (const char* flag :
       {"--rdzv-endpoint", "--token-file", "--rdzv-id", "--expect-ranks", "--json"})
    CHECK(contains(help.out, flag));
}
