// What the HTTP server (observe/http_server.hpp) sends for a GET, and the handler that makes it:
// plain values, so that the pages (rendezvous/daemon_pages.hpp) are built and tested without the
// server. The handler runs on the server's io thread.
#pragma once

#include <functional>
#include <string>

namespace cohort::observe {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// Answers a GET for `target` (path and query, as sent).
using HttpHandler = std::function<HttpResponse(const std::string& target)>;

}  // namespace cohort::observe
