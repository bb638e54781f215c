// Finding this process's cgroup v2 directory from the text of /proc/self/cgroup and
// /proc/self/mountinfo: hybrid and unified layouts, containers whose mount shows only part of the
// hierarchy, escaped mount points, and the cases that must fall back (no cgroup2, no 0:: line).
#include "process/worker_cgroups.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

namespace {

// This machine's layout: cgroup v1 controllers, and cgroup2 on /sys/fs/cgroup/unified.
const char* kHybridMountinfo =
    "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

const char* kUnifiedMountinfo =
    "25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

std::string directory(const char* mountinfo, const char* cgroup) {
  std::string why;
  std::string found = cgroup2_directory(mountinfo, cgroup, why);
  if (found.empty()) CHECK_FALSE(why.empty());
  return found;
}

}  // namespace

TEST_CASE("the cgroup v2 line of /proc/self/cgroup is this process's cgroup", "[unit][process]") {
  std::string why;
  CHECK(unified_cgroup_path("0::/\n", why) == "/");
  CHECK(unified_cgroup_path("9:name=systemd:/\n4:memory:/process_api/10\n1:cpu:/\n0::/a/b\n",
                            why) == "/a/b");
  CHECK(unified_cgroup_path("0::/user.slice/user-1000.slice/session-2.scope\n", why) ==
        "/user.slice/user-1000.slice/session-2.scope");
  for (const char* none : {"", "4:memory:/x\n1:cpu:/\n", "0::\n", "0::relative\n",
                           "10::/not-the-v2-line\n", "0::/gone (deleted)\n"}) {
    INFO(none);
    why.clear();
    CHECK(unified_cgroup_path(none, why).empty());
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("the cgroup2 mount is found in mountinfo, never assumed", "[unit][process]") {
  CHECK(directory(kHybridMountinfo, "/") == "/sys/fs/cgroup/unified");
  CHECK(directory(kHybridMountinfo, "/a/b") == "/sys/fs/cgroup/unified/a/b");
  CHECK(directory(kUnifiedMountinfo, "/user.slice/session-2.scope") ==
        "/sys/fs/cgroup/user.slice/session-2.scope");
  CHECK(directory(kUnifiedMountinfo, "/") == "/sys/fs/cgroup");
}

TEST_CASE("a mount of part of the hierarchy counts only for the cgroups below its root",
          "[unit][process]") {
  // A container without a cgroup namespace: its cgroup is mounted at /sys/fs/cgroup.
  const char* container =
      "600 500 0:30 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n";
  CHECK(directory(container, "/docker/abc") == "/sys/fs/cgroup");
  CHECK(directory(container, "/docker/abc/inner") == "/sys/fs/cgroup/inner");
  CHECK(directory(container, "/docker/abcdef").empty());  // a sibling, not a child
  CHECK(directory(container, "/docker").empty());
  // A second mount whose root matches comes after one that does not.
  std::string both = std::string(container) + "601 500 0:30 / /mnt/cg rw - cgroup2 cgroup2 rw\n";
  CHECK(directory(both.c_str(), "/other") == "/mnt/cg/other");
}

TEST_CASE("mountinfo's escapes and optional fields are understood", "[unit][process]") {
  // Several optional fields before the separator, and a space (\040) in the mount point.
  const char* escaped =
      "40 30 0:37 / /run/my\\040cgroups rw shared:5 master:3 unbindable - cgroup2 none rw\n";
  CHECK(directory(escaped, "/x") == "/run/my cgroups/x");
  // No optional field at all; the file system type decides, not the source's name.
  CHECK(directory("40 30 0:37 / /cg rw - cgroup2 something rw\n", "/") == "/cg");
  CHECK(directory("40 30 0:37 / /cg rw - tmpfs cgroup2 rw\n", "/").empty());
}

TEST_CASE("without a cgroup2 mount there is no directory, and a reason", "[unit][process]") {
  const char* v1_only =
      "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
  std::string why;
  CHECK(cgroup2_directory(v1_only, "/", why).empty());
  CHECK(why == "no cgroup2 file system is mounted");
  CHECK(cgroup2_directory("", "/", why).empty());
  CHECK(cgroup2_directory("garbage\n\n - cgroup2\n", "/", why).empty());
}

TEST_CASE("a per-agent cgroup directory's name gives its agent's pid", "[unit][process]") {
  CHECK(agent_of_cgroup("cohort-4242") == pid_t{4242});
  CHECK(agent_of_cgroup("cohort-4242-3") == pid_t{4242});
  for (const char* other :
       {"cohort-", "cohort-0", "cohort-x", "cohort-12-", "cohort-12-a", "cohort-12-3-4",
        "cohort--1", "cohorts-12", "group-1", "cohort-1234567890", "user.slice"}) {
    INFO(other);
    CHECK_FALSE(agent_of_cgroup(other).has_value());
  }
}
