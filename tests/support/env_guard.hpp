// Changes process environment variables for one test and puts back what was there when the
// guard goes out of scope, even when a REQUIRE fails. Only for code that still reads the process
// environment itself (CLI11's PET_* defaults); validation reads a RunEnvironment instead. Main
// thread; never while another thread may read the environment.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cohort::test {

class EnvGuard {
 public:
  EnvGuard() = default;
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  ~EnvGuard() {
    for (auto entry = saved_.rbegin(); entry != saved_.rend(); ++entry) {
      if (entry->second)
        ::setenv(entry->first.c_str(), entry->second->c_str(), 1);
      else
        ::unsetenv(entry->first.c_str());
    }
  }

  void set(const std::string& name, const std::string& value) {
    remember(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }

  void unset(const std::string& name) {
    remember(name);
    ::unsetenv(name.c_str());
  }

 private:
  void remember(const std::string& name) {
    const char* value = std::getenv(name.c_str());
    saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace cohort::test
