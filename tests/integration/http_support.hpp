// Tests of cohortd's HTTP port: a request with Python's urllib, the strict /metrics check
// (check_metrics.py), and a Cluster whose daemon serves HTTP on a free port. Test thread only.
#pragma once

#include <fstream>

#include "tests/integration/multinode_support.hpp"

namespace cohort::test {

// One HTTP request with Python's urllib: the status code, then a newline, then the body. A
// `bearer` token, if any, goes in the Authorization header; made inside network namespace
// `netns`, if one is named.
inline std::string http_get(const std::string& url, const std::string& method = "GET",
                            const std::string& bearer = {}, const std::string& netns = {}) {
  std::string script =
      "import sys, urllib.request, urllib.error\n"
      "request = urllib.request.Request(sys.argv[1], method=sys.argv[2])\n"
      "if sys.argv[3]: request.add_header('Authorization', 'Bearer ' + sys.argv[3])\n"
      "try:\n"
      "    answer = urllib.request.urlopen(request, timeout=10)\n"
      "except urllib.error.HTTPError as error:\n"
      "    answer = error\n"
      "sys.stdout.write(str(answer.status) + '\\n' + answer.read().decode())\n";
  std::vector<std::string> argv{kPython, "-c", script, url, method, bearer};
  if (!netns.empty()) argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", netns});
  RunResult result = run_to_end(argv, ChildOptions{{}, {}, "", "/tmp", "http"}, 20s);
  INFO(result.err);
  REQUIRE(result.status.success());
  return result.out;
}

inline int http_status(const std::string& answer) { return std::atoi(answer.substr(0, 3).c_str()); }
inline std::string http_body(const std::string& answer) {
  return answer.substr(answer.find('\n') + 1);
}

// The samples of a /metrics text, after the strict check passed: name{labels} -> value.
inline nlohmann::json checked_metrics(Scratch& scratch, const std::string& text) {
  std::string file = scratch.file("metrics.txt");
  std::ofstream(file) << text;
  RunResult result = run_to_end(
      {"/bin/sh", "-c",
       kPython + " " + std::string(kSourceDir) + "/tests/integration/check_metrics.py < " + file},
      scratch.options(), 20s);
  INFO(text << "\n" << result.out << result.err);
  REQUIRE(result.status.success());
  return nlohmann::json::parse(result.out);
}

class HttpCluster {
 public:
  /// `with_token`: the daemon (and every node) proves a token (Cluster::use_token).
  explicit HttpCluster(Scratch& scratch, std::vector<std::string> daemon_flags = {},
                       bool with_token = false)
      : scratch_(scratch), cluster_(scratch) {
    if (with_token) cluster_.use_token();
    daemon_flags.insert(daemon_flags.end(),
                        {"--http-port", "0", "--http-port-file", scratch.file("http_port")});
    cluster_.start_daemon("127.0.0.1", daemon_flags);
    REQUIRE(wait_until([&] { return file_exists(scratch.file("http_port")); }, 10s));
    base_ = "http://127.0.0.1:" +
            std::to_string(std::atoi(read_file(scratch.file("http_port")).c_str()));
  }
  Cluster& cluster() { return cluster_; }
  std::string url(const std::string& path) const { return base_ + path; }
  /// The token the daemon holds (the token file's first line); "" without one.
  std::string token() const {
    if (cluster_.token_file().empty()) return {};
    std::string text = read_file(cluster_.token_file());
    return text.substr(0, text.find('\n'));
  }

 private:
  Scratch& scratch_;
  Cluster cluster_;
  std::string base_;
};

}  // namespace cohort::test
