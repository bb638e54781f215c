#include "launcher/options/run_environment.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/temp_dir.hpp"

using namespace cohort;

namespace {

RunEnvironment machine_with(std::vector<std::string> entries) {
  std::vector<char*> block;
  for (auto& entry : entries) block.push_back(entry.data());
  block.push_back(nullptr);
  return machine_run_environment(block.data());
}

}  // namespace

TEST_CASE("the machine's environment: variables as given, host name, CPUs", "[unit][launcher]") {
  RunEnvironment machine = machine_with({"A=1", "EMPTY=", "B=x=y"});
  CHECK(machine.var("A") == "1");
  CHECK(machine.var("EMPTY") == "");
  CHECK(machine.var("B") == "x=y");
  CHECK_FALSE(machine.var("MISSING"));
  CHECK_FALSE(machine.host_name.empty());
  CHECK(machine.cpu_count >= 1);
}

TEST_CASE("executables are found in the environment's PATH", "[unit][launcher]") {
  test::TempDir dir;
  std::string script = dir.file("tool");
  { std::ofstream(script) << "#!/bin/sh\n"; }
  std::ofstream(dir.file("plain")) << "not executable\n";
  REQUIRE(::chmod(script.c_str(), 0755) == 0);
  RunEnvironment machine = machine_with({"PATH=/nonexistent:" + dir.path()});
  CHECK(machine.find_executable("tool") == script);
  CHECK(machine.find_executable(script) == script);
  CHECK(machine.find_executable("plain").empty());
  CHECK(machine.find_executable(dir.file("plain")).empty());  // a path, but not executable
  CHECK(machine.find_executable("sh").empty());               // not in this PATH
}

TEST_CASE("local hosts are recognised without reverse lookups", "[unit][launcher]") {
  RunEnvironment machine = machine_with({});
  CHECK(machine.is_local_host("127.0.0.1"));
  CHECK(machine.is_local_host("127.0.0.3"));
  CHECK(machine.is_local_host("localhost"));
  CHECK_FALSE(machine.is_local_host("192.0.2.1"));  // TEST-NET-1: never an address of this machine
}
