// The event log with real processes: a scripted 3-node run (a worker failure, a node SIGKILLed,
// completion) gives the expected sequence in cohortd's --event-log and in `cohort status
// --events`, /metrics' counters match it, and headless Chromium draws its timeline page with a
// bar per round per node; `cohort stop` ends a run (agents exit 130, the
// event says who); every agent's own --event-log.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <regex>
#include <set>

#include "common/event_log.hpp"
#include "tests/integration/http_support.hpp"

using namespace cohort::test;

namespace {

const std::vector<std::string> kAddresses{"127.0.0.2", "127.0.0.3", "127.0.0.4"};

std::vector<std::string> scripted_flags(const std::string& run_id) {
  return {"--nnodes",           "2:3",
          "--nproc-per-node",   "2",
          "--rdzv-id",          run_id,
          "--max-restarts",     "3",
          "--rdzv-conf",        "last_call_timeout=1,heartbeat_timeout=2,keep_alive_interval=0.2",
          "--shutdown-timeout", "2"};
}

std::vector<nlohmann::json> daemon_events(const std::vector<nlohmann::json>& events) {
  std::vector<nlohmann::json> kept;
  for (const auto& event : events) {
    if (event.value("source", "") == "daemon") kept.push_back(event);
  }
  return kept;
}

std::vector<std::string> names_of(const std::vector<nlohmann::json>& events) {
  std::vector<std::string> names;
  for (const auto& event : events) names.push_back(event.value("event", ""));
  return names;
}

// The events of `cohort status --events RUN --json`.
std::vector<nlohmann::json> fetched_events(const Cluster& cluster, const std::string& run_id,
                                           const std::string& token_file = {}) {
  std::vector<std::string> argv{kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint(),
                                "--events", run_id,   "--json"};
  if (!token_file.empty()) argv.insert(argv.end(), {"--token-file", token_file});
  RunResult result = run_to_end(argv, ChildOptions{{}, {}, "", "/tmp", "events"}, 10s);
  INFO(result.err);
  REQUIRE(result.status.success());
  return cohort::parse_event_lines(result.out);
}

const std::string kChromium = "/usr/bin/chromium";

// Headless Chromium on `args` (a page to dump or to screenshot); what it printed on stdout.
std::string chromium(Scratch& scratch, std::vector<std::string> args) {
  std::vector<std::string> argv{kChromium, "--headless", "--no-sandbox", "--disable-gpu",
                                "--user-data-dir=" + scratch.file("chromium-profile")};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildOptions options = scratch.options();
  options.name = "chromium";
  RunResult result = run_to_end(argv, options, 60s);
  INFO(result.err);
  REQUIRE(result.status.success());
  return result.out;
}

// The timeline's bars in a rendered DOM: (round, node) of each.
std::set<std::pair<int, std::string>> round_bars(const std::string& dom) {
  static const std::regex kBar(
      R"re(<rect class="round[^"]*" data-round="(\d+)" data-node="([^"]*)")re");
  std::set<std::pair<int, std::string>> bars;
  for (std::sregex_iterator it(dom.begin(), dom.end(), kBar), end; it != end; ++it) {
    bars.insert({std::stoi((*it)[1]), (*it)[2]});
  }
  return bars;
}

}  // namespace

TEST_CASE("a scripted 3-node run: the event log, status --events and /metrics tell the same story",
          "[integration][events][http]") {
  Scratch scratch;
  std::string log = scratch.file("daemon-events.jsonl");
  HttpCluster http(scratch, {"--event-log", log});
  Cluster& cluster = http.cluster();
  // Rank 3 fails once (round 0); round 1 runs until the third node is SIGKILLed; round 2, on
  // two nodes, finishes.
  std::vector<std::string> worker{"--dump-env",
                                  scratch.file("env_{TORCHELASTIC_RESTART_COUNT}_{RANK}.json"),
                                  "--only-rank",
                                  "3",
                                  "--fail-first-n-runs",
                                  "1",
                                  scratch.file("failures"),
                                  "--exit-code",
                                  "5"};
  std::vector<std::string> sleeping = worker;
  sleeping.insert(sleeping.end(), {"--sleep-ms", "4000"});
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (const auto& address : kAddresses) {
    std::vector<std::string> flags = scripted_flags("story");
    flags.insert(flags.end(), {"--event-log", scratch.file("agent-" + address + ".jsonl")});
    nodes.push_back(cluster.node(address, flags, sleeping));
  }
  REQUIRE(wait_until([&] { return cluster.complete_dumps("env_1_") >= 6; }, 30s));
  nodes[2]->signal(SIGKILL);
  nodes[2]->wait(5s);
  for (int i = 0; i < 2; ++i) {
    auto status = nodes[i]->wait(40s);
    INFO(nodes[i]->output());
    REQUIRE(status);
    CHECK(*status == cohort::ExitStatus::exited(0));
  }

  std::vector<nlohmann::json> events = daemon_events(cohort::read_event_file(log));
  INFO(cluster.daemon().output());
  std::vector<std::string> names = names_of(events);
  INFO(nlohmann::json(names).dump());
  // The story, in order, then the survivors leaving once it ended.
  std::vector<std::string> expected{
      "run.created",   "node.joined",     "node.joined",   "node.joined", "round.started",
      "worker.failed", "restart.decided", "round.started", "node.lost",   "restart.decided",
      "round.started", "run.completed",   "node.left",     "node.left"};
  REQUIRE(names == expected);
  CHECK(events[4]["world_size"] == 6);
  CHECK(events[4]["members"].size() == 3);
  CHECK(events[5]["rank"] == 3);
  // The summary's line that says something, not its "=====" banner; the failing node's host.
  CHECK(events[5]["summary"].get<std::string>().find("=====") == std::string::npos);
  CHECK_FALSE(events[5]["summary"].get<std::string>().empty());
  CHECK_FALSE(events[5]["host"].get<std::string>().empty());
  CHECK(events[5]["status"].get<std::string>().find("5") != std::string::npos);
  CHECK(events[6]["round"] == 0);
  CHECK(events[6]["restarts_used"] == 1);
  CHECK(events[7]["round"] == 1);
  CHECK(events[8]["node"].get<std::string>().rfind("127.0.0.4:", 0) == 0);
  CHECK(events[8]["reason"].get<std::string>().rfind("connection closed", 0) == 0);
  CHECK(events[8]["silent_ms"].get<int64_t>() >= 0);
  CHECK(events[8]["member"] == true);  // of round 1: its loss starts the time to recover
  CHECK(events[10]["world_size"] == 4);
  CHECK(events[10]["members"].size() == 2);
  CHECK(events[11]["rounds"] == 3);
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(events[i]["run"] == "story");
    CHECK(events[i]["seq"] == i + 1);  // no gap: nothing lost
    if (i > 0) CHECK(events[i]["t_ms"] >= events[i - 1]["t_ms"]);
  }

  // The daemon still holds the ended run's history: the same lines.
  std::vector<nlohmann::json> fetched = fetched_events(cluster, "story");
  CHECK(fetched == events);
  RunResult table =
      run_to_end({kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint(), "--events", "story"},
                 ChildOptions{{}, {}, "", "/tmp", "events"}, 10s);
  CHECK(table.status.success());
  INFO(table.out);
  // One-liners for people: members as addresses with rank ranges, a failure by its summary's
  // meaningful line, never JSON or the summary's "=====" banner.
  CHECK(std::regex_search(table.out, std::regex(R"(round\.started  round 0, 6 ranks: )"
                                                R"(127\.0\.0\.\d ranks 0-1, 127\.0\.0\.\d )"
                                                R"(ranks 2-3, 127\.0\.0\.\d ranks 4-5\n)")));
  CHECK(contains(table.out, "worker.failed  rank 3 (local "));
  CHECK_FALSE(contains(table.out, "members="));
  CHECK_FALSE(contains(table.out, "summary="));
  CHECK_FALSE(contains(table.out, "====="));
  CHECK_FALSE(contains(table.out, "{\""));
  CHECK(contains(table.out, "run.completed  after 3 rounds, "));

  // /metrics counts what the log says.
  nlohmann::json samples = checked_metrics(scratch, http_body(http_get(http.url("/metrics"))));
  INFO(samples.dump(1));
  CHECK(samples["cohort_events_total"] == events.size());
  CHECK(samples["cohort_runs_created_total"] == 1);
  CHECK(samples["cohort_rounds_started_total"] == 3);
  CHECK(samples["cohort_restarts_total"] == 2);
  CHECK(samples["cohort_worker_failures_total"] == 1);
  CHECK(samples["cohort_nodes_lost_total{reason=\"connection_closed\"}"] == 1);
  CHECK(samples["cohort_runs_ended_total{outcome=\"completed\"}"] == 1);
  CHECK(samples["cohort_recover_seconds_count"] == 2);
  CHECK(samples["cohort_loss_detect_seconds_count"] == 1);

  // The timeline page, rendered by headless Chromium: one bar per round per member node, as the
  // events say; and a PNG of it.
  require_prerequisite(file_exists(kChromium), "chromium (scripts/setup installs it)");
  std::set<std::pair<int, std::string>> members;
  for (const auto& event : events) {
    if (event["event"] != "round.started") continue;
    for (const auto& member : event["members"]) {
      members.insert({event["round"].get<int>(), member["node"].get<std::string>()});
    }
  }
  CHECK(contains(http_get(http.url("/")), "<li><a href=\"/runs/story\">story</a></li>"));
  std::string dom = chromium(scratch, {"--dump-dom", http.url("/runs/story")});
  CHECK(round_bars(dom) == members);
  CHECK(members.size() == 8);
  std::string png = scratch.file("timeline.png");
  chromium(scratch, {"--screenshot=" + png, "--window-size=1400,500", http.url("/runs/story")});
  std::string image = read_file(png);
  CHECK(image.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  CHECK(image.size() > 10000);

  // Each agent wrote its own events: the survivors saw three rounds start and ended with 0.
  std::vector<nlohmann::json> agent =
      cohort::read_event_file(scratch.file("agent-127.0.0.2.jsonl"));
  std::vector<std::string> agent_names = names_of(agent);
  INFO(nlohmann::json(agent_names).dump());
  CHECK(std::count(agent_names.begin(), agent_names.end(), "workers.started") == 3);
  REQUIRE(!agent.empty());
  CHECK(agent.front()["event"] == "agent.started");
  CHECK(agent.back()["event"] == "agent.finished");
  CHECK(agent.back()["exit_code"] == 0);
  CHECK(http.cluster().stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohort stop ends a run: every agent exits 130, the event names who stopped it",
          "[integration][events]") {
  Scratch scratch;
  Cluster cluster(scratch);
  cluster.use_token();
  std::string log = scratch.file("events.jsonl");
  cluster.start_daemon("127.0.0.1", {"--event-log", log});
  std::vector<std::string> flags{"--nnodes",  "2",    "--nproc-per-node",   "2",
                                 "--rdzv-id", "halt", "--shutdown-timeout", "2"};
  std::vector<std::string> worker{"--pid-file", scratch.file("pid_{RANK}"), "--hang"};
  auto a = cluster.node("127.0.0.2", flags, worker);
  auto b = cluster.node("127.0.0.3", flags, worker);
  REQUIRE(wait_until([&] { return cluster.files("pid_").size() >= 4; }, 20s));
  ChildOptions quiet{{}, {}, "", "/tmp", "stop"};

  SECTION("without the token, or for another run, nothing is stopped") {
    RunResult refused =
        run_to_end({kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id", "halt"},
                   quiet, 10s);
    CHECK(refused.status.shell_code() == 3);
    CHECK(contains(refused.err, "authentication failed"));
    RunResult unknown = run_to_end({kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(),
                                    "--rdzv-id", "other", "--token-file", cluster.token_file()},
                                   quiet, 10s);
    CHECK(unknown.status.shell_code() == 3);
    CHECK(contains(unknown.err, "no run 'other'"));
    RunResult unknown_status =
        run_to_end({kCohortBin, "status", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id",
                    "other", "--token-file", cluster.token_file()},
                   quiet, 10s);
    CHECK(unknown_status.status.shell_code() == 3);
    CHECK(contains(unknown_status.err, "no run 'other'"));
    CHECK(daemon_status(cluster.endpoint(), cluster.token_file()).runs.at(0).phase == "running");
    a->signal(SIGTERM);
    b->signal(SIGTERM);
    CHECK(a->wait(10s));
    CHECK(b->wait(10s));
  }
  SECTION("with the token every node stops its workers and exits 130, told who stopped it") {
    std::array<char, 256> host{};
    REQUIRE(::gethostname(host.data(), host.size() - 1) == 0);
    quiet.env["USER"] = "alice";
    const std::string who = std::string("alice@") + host.data();
    RunResult stopped =
        run_to_end({kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(), "--rdzv-id", "halt",
                    "--reason", "maintenance window", "--token-file", cluster.token_file()},
                   quiet, 10s);
    INFO(stopped.err);
    CHECK(stopped.status.success());
    CHECK(contains(stopped.out, "run halt: 2 node(s) told to stop"));
    for (auto* node : {a.get(), b.get()}) {
      auto status = node->wait(15s);
      INFO(node->output());
      REQUIRE(status);
      CHECK(*status == cohort::ExitStatus::exited(130));
      CHECK(contains(node->output(), "the run was stopped by " + who + ": maintenance window"));
      CHECK_FALSE(contains(node->output(), "the run failed"));
    }
    std::vector<nlohmann::json> events = cohort::read_event_file(log);
    auto stop = std::find_if(events.begin(), events.end(),
                             [](const auto& event) { return event["event"] == "run.stopped"; });
    REQUIRE(stop != events.end());
    CHECK((*stop)["by"] == "cohort stop");
    CHECK((*stop)["requested_by"] == who);
    CHECK((*stop)["reason"] == "maintenance window");
    CHECK((*stop)["exit_status"] == 130);
    RunResult again = run_to_end({kCohortBin, "stop", "--rdzv-endpoint", cluster.endpoint(),
                                  "--rdzv-id", "halt", "--token-file", cluster.token_file()},
                                 quiet, 10s);
    INFO(again.out << again.err);
    CHECK(again.status.success());  // its nodes have gone: the daemon remembers how it ended
    CHECK(contains(again.out, "run halt had already ended"));
  }
  CHECK(cluster.stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohort stop and status --events: bad flags are named", "[integration][events]") {
  ChildOptions quiet{{}, {}, "", "/tmp", "stop"};
  RunResult no_id = run_to_end({kCohortBin, "stop"}, quiet, 10s);
  CHECK(no_id.status.shell_code() == 2);
  CHECK(contains(no_id.err, "--rdzv-id"));
  RunResult bad_id = run_to_end({kCohortBin, "stop", "--rdzv-id", "a/b"}, quiet, 10s);
  CHECK(bad_id.status.shell_code() == 2);
  CHECK(contains(bad_id.err, "--rdzv-id"));
  RunResult nobody = run_to_end(
      {kCohortBin, "stop", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id", "x"}, quiet, 10s);
  CHECK(nobody.status.shell_code() == 3);
  CHECK(contains(nobody.err, "cannot reach 127.0.0.1:1"));
  RunResult v6 = run_to_end({kCohortBin, "status", "--rdzv-endpoint", "[::1]:1"}, quiet, 10s);
  CHECK(v6.status.shell_code() == 3);
  CHECK(contains(v6.err, "cannot reach [::1]:1: "));  // an IPv6 address in brackets
  RunResult port0 = run_to_end({kCohortBin, "status", "--rdzv-endpoint", "host:0"}, quiet, 10s);
  CHECK(port0.status.shell_code() == 2);
  CHECK(contains(port0.err, "--rdzv-endpoint: expected host[:port] (port 1-65535), got 'host:0'"));
  for (const char* flag : {"--rdzv-id", "--events"}) {
    RunResult status_id = run_to_end({kCohortBin, "status", flag, "a/b"}, quiet, 10s);
    CHECK(status_id.status.shell_code() == 2);
    CHECK(contains(status_id.err, std::string("cohort status: ") + flag + ": "));
  }
  RunResult watch = run_to_end({kCohortBin, "status", "--events", "x", "--watch"}, quiet, 10s);
  CHECK(watch.status.shell_code() == 2);
  RunResult log = run_to_end({kCohortdBin, "--event-log", "/nonexistent-dir/e.jsonl"}, quiet, 10s);
  CHECK(log.status.shell_code() == 2);
  CHECK(contains(log.err, "--event-log: /nonexistent-dir/e.jsonl"));
}

TEST_CASE("cohort run --standalone --http-port serves its daemon's /metrics and timeline",
          "[integration][events][http]") {
  Scratch scratch;
  auto run = scratch.start({"--standalone", "--nproc-per-node", "2", "--http-port", "0",
                            "--no-python", kTestWorkerBin, "--hang"});
  std::string url;
  REQUIRE(wait_until(
      [&] {
        std::string out = run->output();
        size_t at = out.find("http://127.0.0.1:");
        if (at == std::string::npos) return false;
        url = out.substr(at, out.find('/', at + 7) - at);
        return true;
      },
      10s));
  nlohmann::json samples;
  CHECK(wait_until(
      [&] {
        samples = checked_metrics(scratch, http_body(http_get(url + "/metrics")));
        return samples.value("cohort_rounds_started_total", 0.0) == 1;
      },
      10s));
  CHECK(samples["cohort_runs{phase=\"running\"}"] == 1);
  // --standalone picks a random run id, as torchrun does.
  nlohmann::json runs = nlohmann::json::parse(http_body(http_get(url + "/api/runs")));
  REQUIRE(runs["runs"].size() == 1);
  std::string page = http_get(url + "/runs/" + runs["runs"][0]["run_id"].get<std::string>());
  CHECK(http_status(page) == 200);
  CHECK(contains(page, "data-round=\"0\""));
  run->signal(SIGTERM);
  CHECK(run->wait(10s));
  RunResult bad = scratch.run({"--standalone", "--http-port", "70000", "--no-python", "/bin/true"});
  CHECK(bad.status.shell_code() == 2);
  CHECK(contains(bad.err, "--http-port: expected 0..65535, got 70000"));
}
