#include <catch2/catch.hpp>

#include "launcher/slurm/hostlist.hpp"

using namespace cohort;
using Hosts = std::vector<std::string>;

TEST_CASE("hostlists expand like Slurm's", "[unit][launcher][slurm]") {
  CHECK(*expand_hostlist("gpu-[01-04,07],login1") ==
        Hosts{"gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07", "login1"});
  CHECK(*expand_hostlist("node1") == Hosts{"node1"});
  CHECK(*expand_hostlist("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(*expand_hostlist("rack[1-2]-n[01-02]") ==
        Hosts{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"});
  CHECK(*expand_hostlist("a[098-101]") == Hosts{"a098", "a099", "a100", "a101"});
  CHECK(*expand_hostlist("x,y , z") == Hosts{"x", "y", "z"});
  CHECK(expand_hostlist("")->empty());
}

TEST_CASE("malformed hostlists are refused", "[unit][launcher][slurm]") {
  CHECK_FALSE(expand_hostlist("gpu-[01-04"));
  CHECK_FALSE(expand_hostlist("gpu-01]"));
  CHECK_FALSE(expand_hostlist("gpu-[4-1]"));
  CHECK_FALSE(expand_hostlist("gpu-[a-b]"));
  CHECK_FALSE(expand_hostlist("g[[1]]"));
  CHECK_FALSE(expand_hostlist("n[1-100000000]", 1000));
  CHECK_FALSE(expand_hostlist("n[1-1000],m[1-1000]", 1500));
  CHECK_FALSE(expand_hostlist("n[0-9223372036854775807]"));
}

TEST_CASE("a hostlist range may end at the largest number", "[unit][launcher][slurm]") {
  CHECK(*expand_hostlist("n[9223372036854775806-9223372036854775807]") ==
        Hosts{"n9223372036854775806", "n9223372036854775807"});
}

TEST_CASE("a name with more bracket groups than Slurm makes is refused",
          "[unit][launcher][slurm]") {
  CHECK(expand_hostlist("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1-2]")->size() == 2);
  CHECK_FALSE(expand_hostlist("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]"));
  std::string huge = "n";
  for (int i = 0; i < 40000; ++i) huge += "[1]";
  CHECK_FALSE(expand_hostlist(huge));
}

TEST_CASE("a long name times a wide range is refused before it takes the memory",
          "[unit][launcher][slurm]") {
  std::string name(100000, 'a');                      // an environment variable may hold 128 KiB
  CHECK_FALSE(expand_hostlist(name + "[0-999999]"));  // 100 GB of names
  CHECK_FALSE(expand_hostlist(name + "[0-399]," + name + "[0-399]," + name + "[0-399]"));
  CHECK(expand_hostlist(name + "[0-99]")->size() == 100);
}

TEST_CASE("the first host of a hostlist, checked whole but not expanded",
          "[unit][launcher][slurm]") {
  CHECK(*first_host("gpu-[07-09,11],login1") == "gpu-07");
  CHECK(*first_host(" , rack[2-3]-n[001-100]") == "rack2-n001");
  CHECK(*first_host("solo") == "solo");
  std::string name(100000, 'a');
  CHECK(*first_host(name + "[0-999999]") == name + "0");
  CHECK(*first_host("n[0-9223372036854775807]") == "n0");
  CHECK_FALSE(first_host(""));
  CHECK_FALSE(first_host("gpu-[01-04,07],login[2-1]"));  // the rest is checked too
  CHECK_FALSE(first_host("gpu-[01"));
  CHECK_FALSE(first_host("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]"));
}

TEST_CASE("the first few hosts of a node list, without making the rest", "[unit][slurm]") {
  for (const char* list :
       {"gpu-[01-03]x[1-2],login1", "a,b[1-2],c", "solo", "r[1-2]-n[08-10,3]", "n[1-1]-[5-6],m"}) {
    auto all = expand_hostlist(list);
    REQUIRE(all);
    for (size_t count = 0; count <= all->size() + 1; ++count) {
      auto first = first_hosts(list, count);
      REQUIRE(first);
      size_t expected = std::min(count, all->size());
      CHECK(*first == std::vector<std::string>(all->begin(), all->begin() + expected));
    }
  }
  // A list of 10^12 names costs its first three.
  CHECK(*first_hosts("n[000000-999999]-[000000-999999]", 3) ==
        std::vector<std::string>{"n000000-000000", "n000000-000001", "n000000-000002"});
  CHECK_FALSE(first_hosts("gpu-[01-04,07],login[2-1]", 3));  // the rest is checked too
}

TEST_CASE("hostlists compress to ranges", "[unit][launcher][slurm]") {
  CHECK(compress_hostlist({"gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07", "login1"}) ==
        "gpu-[01-04,07],login1");
  CHECK(compress_hostlist({"n8", "n9", "n10"}) == "n[8-10]");
  CHECK(compress_hostlist({"a098", "a099", "a100"}) == "a[098-100]");
  CHECK(compress_hostlist({"solo"}) == "solo");
  Hosts many{"c1", "c2", "c3", "c5"};
  CHECK(*expand_hostlist(compress_hostlist(many)) == many);
}
