// `cmake --install` of this build into a prefix, then the prefix moved elsewhere: every file of
// the standard layout is there, the moved `cohort` prints its version and finds its Python
// heartbeat module relative to its own bin/ (the source tree plays no part), and without that
// module its workers get no PYTHONPATH entry. Real cmake, real cohort, Debian's python3.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/integration/integration_support.hpp"

using namespace cohort::test;

namespace {

std::string build_dir() { return std::filesystem::path(kCohortBin).parent_path().parent_path(); }

}  // namespace

TEST_CASE("an install under any prefix works once moved, and finds its Python module there",
          "[integration][install]") {
  require_torch();
  Scratch scratch;
  std::string prefix = scratch.file("prefix");
  RunResult install = scratch.run_argv(
      {"/usr/bin/cmake", "--install", build_dir(), "--prefix", prefix}, scratch.options(), 120s);
  INFO(install.out << install.err);
  REQUIRE(install.status.shell_code() == 0);
  for (const char* file :
       {"bin/cohort", "bin/cohortd", "share/cohort/python/cohort_heartbeat.py",
        "include/cohort/heartbeat.hpp", "share/man/man1/cohort.1", "share/man/man1/cohortd.1",
        "share/doc/cohort/README.md", "share/doc/cohort/examples/slurm/multi-node.sbatch",
        "lib/systemd/system/cohortd.service"}) {
    INFO(file);
    CHECK(file_exists(prefix + "/" + file));
  }

  std::string moved = scratch.file("elsewhere");
  REQUIRE(std::rename(prefix.c_str(), moved.c_str()) == 0);
  RunResult version = scratch.run_argv({moved + "/bin/cohort", "--version"}, scratch.options());
  CHECK(version.status.shell_code() == 0);
  CHECK(contains(version.out, "cohort 0.1.0 (commit "));

  std::string script = scratch.file("where.py");
  std::ofstream(script) << "import os, sys\n"
                           "try:\n"
                           "    import cohort_heartbeat\n"
                           "    found = cohort_heartbeat.__file__\n"
                           "except ImportError:\n"
                           "    found = 'none'\n"
                           "open(sys.argv[1], 'w').write(found + '\\n' + "
                           "os.environ.get('PYTHONPATH', '<unset>'))\n";
  auto run_moved = [&](const std::string& out) {
    ChildOptions options = scratch.options({{"PYTHON_EXEC", kPython}});
    return scratch.run_argv(
        {moved + "/bin/cohort", "run", "--nproc-per-node", "1", script, scratch.file(out)},
        options);
  };
  RunResult found = run_moved("found.txt");
  INFO(found.out << found.err);
  REQUIRE(found.status.shell_code() == 0);
  std::string module_dir = moved + "/share/cohort/python";
  CHECK(read_file(scratch.file("found.txt")) == module_dir + "/cohort_heartbeat.py\n" + module_dir);

  std::filesystem::remove_all(module_dir);
  RunResult lost = run_moved("lost.txt");
  INFO(lost.out << lost.err);
  REQUIRE(lost.status.shell_code() == 0);
  CHECK(read_file(scratch.file("lost.txt")) == "none\n<unset>");
  CHECK(scratch.nothing_left());
}
