#include "launcher/options/flag_abbreviations.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <catch2/catch.hpp>

#include "launcher/launch/launch_plan.hpp"
#include "launcher/options/foreign_flags.hpp"
#include "launcher/options/run_options.hpp"

using namespace cohort;

namespace {

ExpandedWords expand(const std::vector<std::string>& words) {
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  return expand_abbreviations(words, flag_specs(app));
}

ExpandedWords expand_launch(const std::vector<std::string>& words) {
  LaunchOptions options;
  CLI::App app;
  add_launch_flags(app, options);
  return expand_abbreviations(words, flag_specs(app));
}

using Words = std::vector<std::string>;

// How many of cohort run's flags have `mark` set.
long run_flags_marked(bool FlagSpec::*mark) {
  RunOptions options;
  CLI::App app;
  add_run_flags(app, options);
  std::vector<FlagSpec> flags = flag_specs(app);
  return std::count_if(flags.begin(), flags.end(), [mark](const FlagSpec& f) { return f.*mark; });
}

}  // namespace

TEST_CASE("an unambiguous prefix names its flag, as argparse does", "[unit][launcher]") {
  CHECK(expand({"--max-r", "3", "t.py"}).words == Words{"--max-restarts", "3", "t.py"});
  CHECK(expand({"--master_p=29501", "t.py"}).words == Words{"--master_port=29501", "t.py"});
  CHECK(expand({"--nproc", "2", "t.py"}).words == Words{"--nproc-per-node", "2", "t.py"});
  CHECK(expand({"--stand", "t.py"}).words == Words{"--standalone", "t.py"});
  CHECK(expand({"--no-p", "/bin/true"}).words == Words{"--no-python", "/bin/true"});
  // torchrun's only flag that starts so, whatever cohort adds (--hang-timeout, ...).
  CHECK(expand({"--h"}).words == Words{"--help"});
  CHECK(expand({"--he"}).words == Words{"--help"});
}

TEST_CASE("full names, values and the script are left alone", "[unit][launcher]") {
  // A value that looks like a flag prefix, and the script's own flags, are not expanded.
  CHECK(expand({"--rdzv-id", "--max", "t.py", "--max-r", "1"}).words ==
        Words{"--rdzv-id", "--max", "t.py", "--max-r", "1"});
  CHECK(expand({"-r", "3", "--tee=1", "t.py", "--nproc"}).words ==
        Words{"-r", "3", "--tee=1", "t.py", "--nproc"});
  CHECK(expand({"-vv", "--", "--max-r"}).words == Words{"-vv", "--", "--max-r"});
  CHECK(expand({"--bogus", "t.py"}).words == Words{"--bogus", "t.py"});  // CLI11 says unknown
  CHECK(expand({"--nnodes", "2", "t.py"}).error.empty());
}

TEST_CASE("a short flag's value after '=' is read as argparse reads it", "[unit][launcher]") {
  CHECK(expand({"-r=3", "-t=1", "t.py"}).words == Words{"-r3", "-t1", "t.py"});
  CHECK(expand({"-m=3"}).words == Words{"-m=3"});  // -m takes no value: left for CLI11
  CHECK(expand({"-r", "3", "t.py", "-r=3"}).words == Words{"-r", "3", "t.py", "-r=3"});
}

TEST_CASE("a long flag with nothing after '=' has the empty value, not the next word",
          "[unit][launcher]") {
  CHECK(expand({"--rdzv_id=", "--nproc", "2", "t.py"}).words ==
        Words{"--rdzv_id", "", "--nproc-per-node", "2", "t.py"});
  CHECK(expand({"--ro=", "t.py", "--x="}).words == Words{"--role", "", "t.py", "--x="});
  CHECK(expand({"--stand=", "t.py"}).words == Words{"--standalone=", "t.py"});  // no value: CLI11's
}

TEST_CASE("cohort's hidden internal flags are no candidates for a prefix", "[unit][launcher]") {
  // --node-rank-hint is cohort's own, hidden: --node_r is torchrun's --node_rank alone.
  ExpandedWords expanded = expand({"--node_r", "0", "t.py"});
  INFO(expanded.error);
  CHECK(expanded.error.empty());
  CHECK(expanded.words == Words{"--node_rank", "0", "t.py"});
  CHECK(expand({"--node-rank-hint", "t.py"}).words == Words{"--node-rank-hint", "t.py"});
}

TEST_CASE("an ambiguous prefix is an error listing the candidates", "[unit][launcher]") {
  ExpandedWords expanded = expand({"--ma", "1", "t.py"});
  INFO(expanded.error);
  CHECK(expanded.error.find("ambiguous option: --ma could match") != std::string::npos);
  CHECK(expanded.error.find("--max-restarts") != std::string::npos);
  CHECK(expanded.error.find("--master-addr") != std::string::npos);
  CHECK(expanded.error.find("--master-port") != std::string::npos);
  CHECK(expand({"--rdzv", "x", "t.py"}).error.find("--rdzv-endpoint") != std::string::npos);
  // Ambiguous under torchrun 1.13 too: --standalone, --start-method; --module, --monitor-interval.
  CHECK_FALSE(expand({"--st", "x", "t.py"}).error.empty());
  CHECK_FALSE(expand({"--mo", "1", "t.py"}).error.empty());
}

TEST_CASE("a prefix that names several of torchrun's flags but one of 1.13's is that one",
          "[unit][launcher]") {
  // --log was --log_dir under torchrun 1.13; 2.x added --logs-specs and
  // --log-line-prefix-template, and cohort took the 1.13 command line for an ambiguity.
  CHECK(expand({"--log", "x", "t.py"}).words == Words{"--log-dir", "x", "t.py"});
  CHECK(expand({"--lo", "x", "t.py"}).words == Words{"--log-dir", "x", "t.py"});
  CHECK(expand({"--log_", "x", "t.py"}).words == Words{"--log_dir", "x", "t.py"});
  // Two of 1.13's (--local-addr and --local-ranks-filter are 2.x's): still ambiguous.
  CHECK_FALSE(expand({"--no", "/bin/true"}).error.empty());
  CHECK(run_flags_marked(&FlagSpec::torchrun_113) == 21);  // a misspelt name: one fewer
}

TEST_CASE("a prefix of one torchrun flag and cohort's own is torchrun's, as under torchrun",
          "[unit][launcher]") {
  // torchrun reads --max as --max-restarts; cohort adds --max-same-failures.
  CHECK(expand({"--max", "1", "t.py"}).words == Words{"--max-restarts", "1", "t.py"});
  CHECK(expand({"--max_", "1", "t.py"}).words == Words{"--max_restarts", "1", "t.py"});
  CHECK(expand({"--no-", "/bin/true"}).words == Words{"--no-python", "/bin/true"});
  CHECK_FALSE(expand({"--no", "/bin/true"}).error.empty());  // --node-rank too: as torchrun
  CHECK(expand({"--max-s", "2", "t.py"}).words == Words{"--max-same-failures", "2", "t.py"});
  // Two of cohort's own, and none of torchrun's: still ambiguous.
  CHECK_FALSE(expand({"--hea", "x", "t.py"}).error.empty());
}

TEST_CASE("each of torchrun's 32 flags (--help too) is a flag of cohort run, marked as torchrun's",
          "[unit][launcher]") {
  CHECK(run_flags_marked(&FlagSpec::torchrun) == 32);  // a misspelt name would mark one fewer
}

TEST_CASE("a one-dash word is a cluster of short flags only if every letter is one",
          "[unit][launcher]") {
  // Read as -h and more letters, "-hostfle" printed the help and exited 0.
  CHECK(expand_launch({"-hostfle", "hf", "t.py"}).error ==
        "unknown flag '-hostfle' (a long flag takes two dashes)");
  CHECK(expand({"-hx", "t.py"}).error == "unknown flag '-hx' (a long flag takes two dashes)");
  CHECK(expand({"-vv", "t.py"}).error.empty());
  CHECK(expand({"-h"}).error.empty());
  CHECK(expand({"-r3", "t.py"}).error.empty());  // a short flag and its value
  // mpirun's one-dash long flags with their value after '='.
  CHECK(expand_launch({"-np=4", "-host=a,b", "t.py"}).words ==
        Words{"--np=4", "--host=a,b", "t.py"});
}

TEST_CASE("mpirun's one-dash long flags get two where the command has them", "[unit][launcher]") {
  CHECK(expand_launch({"-np", "8", "-hostfile", "hf", "-ppn", "4", "t.py", "-np", "1"}).words ==
        Words{"--np", "8", "--hostfile", "hf", "--ppn", "4", "t.py", "-np", "1"});
  CHECK(expand_launch({"-host", "a,b", "-machinefile", "m", "-npernode", "2", "t.py"}).words ==
        Words{"--host", "a,b", "--machinefile", "m", "--npernode", "2", "t.py"});
  CHECK(expand_launch({"-hosts", "a", "-n", "2", "t.py"}).words ==
        Words{"--hosts", "a", "-n", "2", "t.py"});
  CHECK(expand({"-np", "8", "t.py"}).words == Words{"-np", "8", "t.py"});  // cohort run: unknown
  CHECK(expand_launch({"-report-bindings", "t.py"}).words == Words{"--report-bindings", "t.py"});
}

TEST_CASE("another launcher's flag is refused with what cohort has instead, not read as a cluster",
          "[unit][launcher]") {
  // Read as clusters: -t with the value "ag-output", -m with "ca".
  CHECK(expand_launch({"-tag-output", "t.py"}).error ==
        "unknown flag '-tag-output' (mpirun's; every worker line already starts with "
        "[host:rank]:)");
  CHECK(expand_launch({"-x", "A=1", "-mca", "btl", "tcp", "t.py"}).error ==
        "unknown flag '-mca' (Open MPI's; NCCL and Gloo read NCCL_* and GLOO_* variables: -x "
        "NAME=value)");
  CHECK(expand_launch({"--num_gpus=2", "t.py"}).error ==
        "unknown flag '--num_gpus=2' (DeepSpeed's; here --nproc-per-node)");
  CHECK(expand({"-genv", "A", "1", "t.py"}).error ==
        "unknown flag '-genv' (mpiexec's; here -x NAME=value)");
  // The script's own words are the script's.
  CHECK(expand_launch({"t.py", "--num_gpus", "2"}).error.empty());
  CHECK(expand_launch({"-x", "-mca", "t.py"}).error.empty());  // -x's value, however odd
}

TEST_CASE("no other launcher's flag is, or abbreviates, one of cohort's own", "[unit][launcher]") {
  LaunchOptions options;
  CLI::App app;
  add_launch_flags(app, options);  // cohort run's flags and the launch's own
  std::vector<std::string> own;
  for (const FlagSpec& flag : flag_specs(app)) {
    own.insert(own.end(), flag.long_names.begin(), flag.long_names.end());
    own.insert(own.end(), flag.short_names.begin(), flag.short_names.end());
  }
  for (const std::string& foreign : foreign_flag_names()) {
    INFO(foreign);
    CHECK(std::none_of(own.begin(), own.end(),
                       [&](const std::string& name) { return name.rfind(foreign, 0) == 0; }));
  }
  CHECK(foreign_flag_names().size() > 20);
}
