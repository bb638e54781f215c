// cohortd's HTTP port with real clients: /metrics read by a strict Prometheus text check
// (check_metrics.py, with prometheus_client's parser), its figures against the run's, the runs
// page and /api/runs, errors for what it does not serve; the timeline page drawn by headless
// Chromium.
#include <csignal>

#include "tests/integration/http_support.hpp"

using namespace cohort::test;

TEST_CASE("cohortd --http-port: /metrics passes a strict check and matches the run",
          "[integration][http]") {
  require_prerequisite(file_exists("/usr/lib/python3/dist-packages/prometheus_client/parser.py"),
                       "python3-prometheus-client (scripts/setup installs it)");
  Scratch scratch;
  HttpCluster http(scratch);
  std::vector<std::string> flags{"--nnodes",  "2",    "--nproc-per-node", "1",
                                 "--rdzv-id", "seen", "--max-restarts",   "2"};
  auto a = http.cluster().node("127.0.0.2", flags, {"--hang"});
  auto b = http.cluster().node("127.0.0.3", flags, {"--hang"});
  nlohmann::json samples;
  bool running = wait_until(
      [&] {
        std::string answer = http_get(http.url("/metrics"));
        if (http_status(answer) != 200) return false;
        samples = checked_metrics(scratch, http_body(answer));
        return samples.value("cohort_runs{phase=\"running\"}", 0.0) == 1;
      },
      20s);
  INFO(samples.dump(1) << http.cluster().daemon().output());
  REQUIRE(running);
  CHECK(samples["cohort_nodes{run=\"seen\",state=\"member\"}"] == 2);
  CHECK(samples["cohort_run_round{run=\"seen\"}"] == 0);
  CHECK(samples["cohort_run_restarts_left{run=\"seen\"}"] == 2);
  CHECK(samples["cohort_control_connections"] >= 2);
  CHECK(samples.contains("cohort_recover_seconds_bucket{le=\"+Inf\"}"));

  std::string runs = http_get(http.url("/api/runs"));
  CHECK(http_status(runs) == 200);
  cohort::proto::StatusReply status = daemon_status(http.cluster().endpoint());
  // That question was one more control connection accepted (HTTP requests are not).
  double accepted = samples["cohort_control_connections_accepted_total"];
  CHECK(accepted >= 2);
  nlohmann::json later = checked_metrics(scratch, http_body(http_get(http.url("/metrics"))));
  CHECK(later["cohort_control_connections_accepted_total"] == accepted + 1);
  std::string error;
  auto from_http = cohort::proto::decode_status_document(http_body(runs), error);
  REQUIRE(from_http);
  REQUIRE(from_http->runs.size() == 1);
  CHECK(from_http->runs[0].run_id == "seen");
  CHECK(from_http->runs[0].nodes.size() == status.runs[0].nodes.size());
  std::string page = http_get(http.url("/"));
  CHECK(http_status(page) == 200);
  CHECK(contains(page, "<a href=\"/runs/seen\">seen</a>"));
  CHECK(http_status(http_get(http.url("/nothing"))) == 404);
  CHECK(http_status(http_get(http.url("/runs/unknown"))) == 404);
  CHECK(http_status(http_get(http.url("/metrics"), "POST")) == 405);
  for (auto* node : {a.get(), b.get()}) node->signal(SIGTERM);
  for (auto* node : {a.get(), b.get()}) CHECK(node->wait(10s));
  CHECK(http.cluster().stop_daemon());
  CHECK(scratch.nothing_left());
}

TEST_CASE("cohortd with a token asks every HTTP request for it, on loopback too",
          "[integration][http][security]") {
  Scratch scratch;
  HttpCluster http(scratch, {}, true);
  auto node =
      http.cluster().node("127.0.0.2", {"--nnodes", "1", "--rdzv-id", "secret"}, {"--hang"});
  REQUIRE(wait_until(
      [&] {
        return daemon_status(http.cluster().endpoint(), http.cluster().token_file()).runs.size() ==
               1;
      },
      20s));
  for (const char* path : {"/", "/api/runs", "/api/runs/secret", "/runs/secret", "/metrics"}) {
    INFO(path);
    std::string refused = http_get(http.url(path));
    CHECK(http_status(refused) == 401);
    CHECK_FALSE(contains(refused, "secret"));
    CHECK(http_status(http_get(http.url(path), "GET", "not-the-token")) == 401);
    std::string answered = http_get(http.url(path), "GET", http.token());
    CHECK(http_status(answered) == 200);
  }
  CHECK(contains(http_get(http.url("/api/runs"), "GET", http.token()), "\"secret\""));
  node->signal(SIGTERM);
  CHECK(node->wait(10s));
  CHECK(http.cluster().stop_daemon());
}

TEST_CASE("cohortd --http-address beyond loopback needs a token, bad values name the flag",
          "[integration][http]") {
  Scratch scratch;
  RunResult open = run_to_end({kCohortdBin, "--http-port", "0", "--http-address", "0.0.0.0"},
                              scratch.options(), 10s);
  CHECK(open.status == cohort::ExitStatus::exited(2));
  CHECK(contains(open.err, "--http-address 0.0.0.0: without a token"));
  RunResult bad = run_to_end({kCohortdBin, "--http-port", "70000"}, scratch.options(), 10s);
  CHECK(bad.status == cohort::ExitStatus::exited(2));
  CHECK(contains(bad.err, "--http-port"));
  RunResult address = run_to_end({kCohortdBin, "--http-port", "0", "--http-address", "nowhere"},
                                 scratch.options(), 10s);
  CHECK(address.status == cohort::ExitStatus::exited(2));
  CHECK(contains(address.err, "--http-address: expected an IP address"));
}
