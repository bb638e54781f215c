#include "observe/prometheus_text.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

using namespace cohort::observe;

TEST_CASE("Prometheus text: families, labels escaped, values as Prometheus reads them",
          "[unit][observe]") {
  PrometheusText text;
  text.family("cohort_runs", "gauge", "Runs by phase.\nSecond line \\ here");
  text.sample("cohort_runs", {{"phase", "running"}}, 2);
  text.sample("cohort_runs", {{"phase", "say \"hi\"\\\n"}}, 0.25);
  text.family("cohort_up", "gauge", "1");
  text.sample("cohort_up", std::numeric_limits<double>::infinity());
  CHECK(text.text() ==
        "# HELP cohort_runs Runs by phase.\\nSecond line \\\\ here\n"
        "# TYPE cohort_runs gauge\n"
        "cohort_runs{phase=\"running\"} 2\n"
        "cohort_runs{phase=\"say \\\"hi\\\"\\\\\\n\"} 0.25\n"
        "# HELP cohort_up 1\n# TYPE cohort_up gauge\ncohort_up +Inf\n");
  CHECK(format_sample_value(std::nan("")) == "NaN");
  CHECK(format_sample_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_sample_value(0.1) == "0.1");
  CHECK(format_sample_value(-3) == "-3");
  CHECK(format_sample_value(1e300) == "1e+300");
}

TEST_CASE("Prometheus histograms: cumulative buckets up to +Inf, sum and count",
          "[unit][observe]") {
  Histogram histogram({0.1, 1, 10});
  for (double value : {0.05, 0.1, 0.5, 20.0}) histogram.observe(value);
  PrometheusText text;
  text.histogram("cohort_recover_seconds", {{"run", "a"}}, histogram);
  CHECK(text.text() ==
        "cohort_recover_seconds_bucket{run=\"a\",le=\"0.1\"} 2\n"
        "cohort_recover_seconds_bucket{run=\"a\",le=\"1\"} 3\n"
        "cohort_recover_seconds_bucket{run=\"a\",le=\"10\"} 3\n"
        "cohort_recover_seconds_bucket{run=\"a\",le=\"+Inf\"} 4\n"
        "cohort_recover_seconds_sum{run=\"a\"} 20.65\n"
        "cohort_recover_seconds_count{run=\"a\"} 4\n");
}
