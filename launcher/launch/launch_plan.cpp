#include "launcher/launch/launch_plan.hpp"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "common/exit_codes.hpp"
#include "common/host_port.hpp"
#include "common/text.hpp"
#include "launcher/launch/allocation.hpp"
#include "launcher/options/help_format.hpp"
#include "launcher/options/run_validation.hpp"

namespace cohort {
namespace {

// Run flags the launch sets itself on every host (or uses itself: --store-ports and --http-port
// for its own daemon, --token-file for the token it sends over ssh's stdin), so they are not
// forwarded. --event-log is both: the launch's daemon and every host's agent append to it.
const std::set<std::string> kPlannedRunFlags = {
    "--nnodes",          "--nproc-per-node", "--rdzv-backend",   "--rdzv-endpoint", "--rdzv-id",
    "--local-addr",      "--node-rank",      "--node-rank-hint", "--store-ports",   "--standalone",
    "--under-launch",    "--master-addr",    "--master-port",    "--token-file",    "--http-port",
    "--launched-ms-ago", "--rdzv-fallback",  "--token-wait-ms"};

const std::set<std::string> kLaunchFlags = {
    "--hosts",         "--hostfile",  "--np",         "--npernode",
    "--include",       "--exclude",   "-x",           "--secret",
    "--env-file",      "--ssh-port",  "--ssh-option", "--connect-timeout",
    "--remote-cohort", "--rdzv-host", "--launcher",   "--launcher-args",
    "--host-retries",  "--help",
};

bool given(const CLI::App& app, const std::string& flag) {
  return app.get_option(flag)->count() > 0;
}

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_loopback(const HostSlots& host) { return is_loopback_host(host.address()); }

bool all_local(const std::vector<HostSlots>& hosts) {
  return std::all_of(hosts.begin(), hosts.end(), is_loopback);
}

// With worker rank 0's store (--worker-store rank0, or TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 as
// it reaches the hosts), MASTER_ADDR is rank 0's host as the launch names it: a loopback name
// (localhost, 127.0.0.1) among other hosts would point their workers at themselves.
void check_loopback_mix(const CLI::App& app, const RunOptions& run, LaunchPlan& plan) {
  auto loopback = std::find_if(plan.hosts.begin(), plan.hosts.end(), is_loopback);
  if (loopback == plan.hosts.end() || all_local(plan.hosts)) return;
  auto share = plan.env.find("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
  bool env_rank0 = share != plan.env.end() && share->second == "1";
  if (given(app, "--worker-store") ? run.worker_store != "rank0" : !env_rank0) return;
  plan.problems.push_back(cat(plan.hosts_source, ": ", loopback->address(),
                              " is this machine to itself only, and with worker rank 0's store "
                              "the other hosts' workers would take it for themselves; name it "
                              "by a name or address they reach"));
}

// What -H and --hostfile were given, when that cannot name the hosts: empty (a shell variable
// unset), given twice, or (DeepSpeed's -H) the name of a hostfile here. Else empty.
std::string host_flags_problem(const CLI::App& app, const LaunchOptions& options,
                               const LaunchContext& context) {
  if (given(app, "--hosts") && trim(options.host_list).empty())
    return "-H: empty; give the hosts (-H node1:4,node2:4), or leave -H out for the job's hosts";
  if (given(app, "--hostfile") && options.hostfile.empty())
    return "--hostfile: empty; name the file, or leave --hostfile out for the job's hosts";
  if (app.get_option("--hostfile")->count() > 1)
    return "--hostfile: given twice; give one hostfile";
  if (!options.hostfile.empty() && !options.host_list.empty())
    return "-H, --hostfile: give the hosts with one of them, not both";
  const std::string& list = options.host_list;
  if (list.empty() || list.find_first_of(",:\n") != std::string::npos) return {};
  std::string path = list.front() == '/' ? list : context.working_dir + "/" + list;
  struct stat file {};
  if (::stat(path.c_str(), &file) == 0 && S_ISREG(file.st_mode)) {
    return cat("-H: '", list,
               "' is a file here: a hostfile is given with --hostfile (DeepSpeed's "
               "-H); a host of that name is written ",
               list, ":1");
  }
  return {};
}

// -H, --hostfile, else the batch allocation cohort launch runs in; the plan's hosts_source says
// which.
HostSelection select_hosts(const CLI::App& app, const LaunchOptions& options,
                           const LaunchContext& context, LaunchPlan& plan) {
  std::string& source = plan.hosts_source;
  HostSelection selection;
  if (std::string problem = host_flags_problem(app, options, context); !problem.empty()) {
    selection.problems.push_back(problem);
    return selection;
  }
  if (!options.host_list.empty()) {
    // Given more than once, as Open MPI takes it: one list ("-H a -H b" is "-H a,b").
    std::string list = options.host_list;
    std::replace(list.begin(), list.end(), '\n', ',');
    selection = parse_host_list(list);
    source = "-H";
  } else if (!options.hostfile.empty()) {
    auto text = read_whole_file(options.hostfile);
    if (text) selection = parse_hostfile(*text, options.hostfile);
    if (!text)
      selection.problems.push_back(cat("--hostfile: cannot read '", options.hostfile, "'"));
    source = "--hostfile " + options.hostfile;
  } else if (auto allocation = find_allocation(context.env, read_whole_file)) {
    selection = std::move(allocation->selection);
    source = allocation->source;
    plan.scheduler = allocation->scheduler;
  } else {
    selection.problems.push_back(
        "-H, --hostfile: give the hosts (-H node1:4,node2:4 or --hostfile FILE), or run cohort "
        "launch inside a Slurm, PBS or LSF allocation, whose hosts it then uses");
    return selection;
  }
  if (selection.problems.empty()) filter_hosts(selection, options.include, options.exclude);
  return selection;
}

// The env file named by --env-file, or the first of ./.cohort_env and ~/.cohort_env.
void forward_environment(const LaunchOptions& options, const LaunchContext& context,
                         LaunchPlan& plan) {
  std::string text;
  std::string origin = options.env_file;
  if (!options.env_file.empty()) {
    auto file = read_whole_file(options.env_file);
    if (!file) plan.problems.push_back(cat("--env-file: cannot read '", options.env_file, "'"));
    text = file.value_or("");
  } else {
    for (const std::string& candidate :
         {context.working_dir + "/.cohort_env", context.home + "/.cohort_env"}) {
      if (auto file = read_whole_file(candidate)) {
        text = *file;
        origin = candidate;
        break;
      }
    }
  }
  ForwardedEnv forwarded =
      forwarded_env(context.env, text, origin, options.exports, options.secrets);
  plan.env = std::move(forwarded.vars);
  for (const std::string& secret : options.secrets)
    plan.secret_names.insert(secret.substr(0, secret.find('=')));
  plan.problems.insert(plan.problems.end(), forwarded.problems.begin(), forwarded.problems.end());
}

// The token travels over ssh's stdin only: never in the remote command line's environment.
void keep_token_off_command_lines(LaunchPlan& plan) {
  if (plan.env.count("COHORT_TOKEN")) {
    plan.problems.push_back(
        "-x, --env-file: COHORT_TOKEN would show on every host's command line; cohort launch "
        "sends the token over ssh itself (set COHORT_TOKEN or --token-file here only)");
  }
  if (size_t bytes = secrets_line(secret_env(plan)).size(); bytes > kMaxSecretsLineBytes) {
    plan.problems.push_back(cat("-x, --env-file: the forwarded secrets (", bytes,
                                " bytes in hex) go over ssh's stdin, which takes at most ",
                                kMaxSecretsLineBytes, " bytes"));
  }
}

// How many times a flag was turned on: "--raw-output" once, "-vv" twice; "--raw-output=false"
// and PET_RAW_OUTPUT=0 (CLI11 counts them as given) not at all.
int64_t times_on(const CLI::Option& option) {
  int64_t times = 0;
  for (const std::string& value : option.results()) {
    try {
      times += value.empty() ? 1 : CLI::detail::to_flag_value(value);
    } catch (const std::exception&) {
      times += 1;  // CLI11 took it as given
    }
  }
  return times;
}

// Every run flag the user gave, as given (the last value of one given twice), but those the
// launch plans itself.
std::vector<std::string> forwarded_run_flags(const CLI::App& app) {
  std::vector<std::string> flags;
  for (const CLI::Option* option : app.get_options()) {
    std::string name = option->get_name();
    if (option->count() == 0 || kLaunchFlags.count(name) || kPlannedRunFlags.count(name)) continue;
    if (option->get_expected_min() == 0) {  // a flag: repeat it (-vv)
      for (int64_t i = 0; i < times_on(*option); ++i) flags.push_back(name);
      continue;
    }
    for (const std::string& value : option->reduced_results()) {  // given twice: the last
      flags.push_back(name);
      flags.push_back(value);
    }
  }
  return flags;
}

void reject_single_node_flags(const CLI::App& app, const RunOptions& run, LaunchPlan& plan) {
  for (const char* flag :
       {"--standalone", "--master-addr", "--master-port", "--node-rank", "--local-addr",
        "--node-rank-hint", "--under-launch", "--launched-ms-ago", "--token-wait-ms"}) {
    if (given(app, flag))
      plan.problems.push_back(cat(flag, ": cohort launch sets this for every host itself"));
  }
  if (given(app, "--rdzv-fallback")) {
    plan.problems.push_back(
        "--rdzv-fallback: cohort launch hosts the rendezvous itself, and a run without the launch "
        "ends (its hosts are started again instead)");
  }
  if (given(app, "--rdzv-backend") && run.rdzv_backend != "c10d")
    plan.problems.push_back("--rdzv-backend: cohort launch uses c10d (its own daemon)");
}

// The run flags' own checks (cohort run's, but for the rendezvous endpoint and the script, which
// are the hosts' business), on what the launch will send, in the launching environment.
void check_run_flags(const RunOptions& run, const LaunchContext& context, LaunchPlan& plan) {
  RunOptions probe = run;
  probe.rdzv_backend = "c10d";  // reject_single_node_flags reports any other
  const std::string& nproc = run.nproc_per_node;
  if (nproc == "gpu" || nproc == "auto" || nproc == "cpu")
    probe.nproc_per_node = "1";  // counted on each host, not here
  RunEnvironment launching;
  launching.env = context.env;
  ValidatedRun validated = validate_run_flags(probe, launching);
  plan.problems.insert(plan.problems.end(), validated.problems.begin(), validated.problems.end());
  plan.shutdown_timeout = validated.config.shutdown_timeout;
  plan.daemon.store_port_min = validated.daemon.options.store_port_min;
  plan.daemon.store_port_max = validated.daemon.options.store_port_max;
  plan.daemon.store_quota_bytes = validated.daemon.options.store_quota_bytes;
  plan.daemon.store_budget_bytes = validated.daemon.options.store_budget_bytes;
  plan.daemon.event_log = validated.daemon.options.event_log;
  plan.daemon.http_port = validated.daemon.options.http_port;
}

// -np with a count per host: the first total / count hosts.
void take_whole_hosts(int total, const std::string& per_host, LaunchPlan& plan) {
  auto count = parse_int(per_host);
  if (!count || *count < 1) {
    plan.problems.push_back(
        cat("-np: needs a number of workers per host, not --nproc-per-node '", per_host, "'"));
  } else if (total % *count != 0) {
    plan.problems.push_back(
        cat("-np ", total, ": not a multiple of the ", *count, " workers per host"));
  } else if (static_cast<size_t>(total / *count) > plan.hosts.size()) {
    plan.problems.push_back(cat("-np ", total, ": needs ", total / *count, " hosts of ", *count,
                                " workers, and only ", plan.hosts.size(),
                                plan.hosts.size() == 1 ? " is given" : " are given"));
  } else {
    plan.hosts.resize(static_cast<size_t>(total / *count));
  }
}

// -np: the hosts' slots filled in order; a host given fewer keeps its first slots, one given
// none is left out.
void fill_slots(int total, LaunchPlan& plan) {
  std::vector<HostSlots> used;
  int left = total;
  for (HostSlots host : plan.hosts) {
    if (left == 0) break;
    int take = std::min(left, host.workers());
    if (host.kept.empty()) host.slots = take;
    host.kept.resize(std::min(host.kept.size(), static_cast<size_t>(take)));
    left -= take;
    used.push_back(std::move(host));
  }
  if (left > 0) {
    plan.problems.push_back(cat("-np ", total, ": the hosts have ", total - left, " slots"));
    return;
  }
  plan.hosts = std::move(used);
}

// mpirun's -np N (workers in all), with or without a count per host.
void apply_total_workers(const CLI::App& app, const LaunchOptions& options,
                         const std::string& per_host, LaunchPlan& plan) {
  if (options.total_workers == 0 || !plan.problems.empty()) return;
  if (given(app, "--nnodes")) {
    plan.problems.push_back("-np: it sets how many hosts take part; leave out --nnodes");
  } else if (!per_host.empty()) {
    take_whole_hosts(options.total_workers, per_host, plan);
  } else {
    fill_slots(options.total_workers, plan);
  }
}

void plan_nodes(const CLI::App& app, const RunOptions& run, LaunchPlan& plan) {
  int hosts = static_cast<int>(plan.hosts.size());
  if (!given(app, "--nnodes")) {
    plan.nnodes = std::to_string(hosts);
    plan.min_nodes = hosts;
    return;
  }
  plan.nnodes = run.nnodes;
  std::vector<std::string> malformed;  // check_run_flags reports it
  int low = parse_nnodes(run.nnodes, malformed).first;
  if (!malformed.empty()) return;
  plan.min_nodes = low;
  if (plan.min_nodes > hosts) {
    plan.problems.push_back(cat("--nnodes ", run.nnodes, ": needs at least ", plan.min_nodes,
                                " hosts, and only ", hosts,
                                hosts == 1 ? " is given" : " are given"));
  }
}

void plan_rendezvous(const CLI::App& app, const LaunchOptions& options,
                     const LaunchContext& context, LaunchPlan& plan) {
  const RunOptions& run = options.run;
  plan.run_id = given(app, "--rdzv-id") ? run.rdzv_id : "launch-" + random_run_id();
  if (!run.rdzv_endpoint.empty()) {
    auto endpoint = parse_host_port(run.rdzv_endpoint, 29400);
    if (!endpoint || endpoint->port == 0) {
      plan.problems.push_back(cat("--rdzv-endpoint: expected host:port of a running cohortd, got '",
                                  run.rdzv_endpoint, "'"));
    }
    if (!options.rdzv_host.empty())
      plan.problems.push_back("--rdzv-host: only for the embedded daemon; drop --rdzv-endpoint");
    plan.rdzv_endpoint = run.rdzv_endpoint;
    return;
  }
  bool local = all_local(plan.hosts);
  const std::string& given_host = options.rdzv_host;
  if (!given_host.empty() && !is_host_name(given_host) && !is_ip_address(given_host)) {
    plan.problems.push_back(
        cat("--rdzv-host: expected a host name or an address, got '", given_host, "'"));
  }
  plan.rdzv_host = options.rdzv_host;
  if (plan.rdzv_host.empty()) plan.rdzv_host = local ? "127.0.0.1" : context.host_name;
  bool loopback = plan.rdzv_host == "localhost" || plan.rdzv_host.rfind("127.", 0) == 0;
  plan.daemon.address = loopback ? "127.0.0.1" : "0.0.0.0";
  plan.daemon.port = 0;
}

// --launcher: as mpirun does, srun inside a Slurm job whose own hosts the launch uses (where ssh
// into a node needs pam_slurm_adopt, a step needs nothing), else ssh.
void plan_transport(const CLI::App& app, const LaunchOptions& options, const LaunchContext& context,
                    LaunchPlan& plan) {
  bool in_job = context.env.count("SLURM_JOB_ID") > 0;
  if (options.launcher.empty()) {
    bool srun = plan.scheduler == "Slurm" && in_job && context.has_srun;
    bool here = !plan.hosts.empty() &&
                std::all_of(plan.hosts.begin(), plan.hosts.end(), [](const HostSlots& host) {
                  // user@localhost: that user's, over ssh
                  return names_this_machine(host.name);
                });
    plan.transport = srun ? Transport::Srun : here ? Transport::Local : Transport::Ssh;
  } else if (options.launcher == "srun") {
    plan.transport = Transport::Srun;
    if (!in_job) {
      plan.problems.push_back(
          "--launcher srun: needs a Slurm job (no SLURM_JOB_ID here): run cohort launch inside "
          "salloc or an sbatch script");
    }
  } else if (options.launcher != "ssh") {
    plan.problems.push_back(cat("--launcher: expected ssh or srun, got '", options.launcher, "'"));
  }
  if (plan.transport != Transport::Ssh) {
    for (const char* flag : {"--ssh-port", "--ssh-option", "--host-retries"}) {
      if (!given(app, flag)) continue;
      plan.problems.push_back(cat(flag,
                                  plan.transport == Transport::Srun
                                      ? ": this launch starts its hosts with srun, not ssh"
                                      : ": this launch starts its hosts, this machine, without ssh",
                                  " (--launcher ssh to use ssh)"));
    }
  }
  if (plan.transport == Transport::Srun) {
    std::string error;
    if (auto words = split_shell_words(options.launcher_args, error)) {
      plan.srun.extra_args = std::move(*words);
    } else {
      plan.problems.push_back(cat("--launcher-args: ", error,
                                  " (the words are split as a shell splits them: quote a word "
                                  "with spaces, '--comment=two words')"));
    }
    // The allocation's hosts have the job's tasks as slots: each step takes all their GPUs.
    if (plan.scheduler == "Slurm") plan.srun.gpus_per_task = job_gpus_per_task(context.env);
  } else if (given(app, "--launcher-args")) {
    plan.problems.push_back(
        "--launcher-args: words for srun (--launcher srun); ssh takes --ssh-option and "
        "--ssh-port");
  }
}

// The run flags, with mpirun's -N (--npernode) as --nproc-per-node.
RunOptions with_workers_per_host(const CLI::App& app, const LaunchOptions& options,
                                 LaunchPlan& plan) {
  RunOptions run = options.run;
  if (!given(app, "--npernode")) return run;
  if (given(app, "--nproc-per-node"))
    plan.problems.push_back("-N, --npernode: --nproc-per-node by another name; give one");
  run.nproc_per_node = options.per_host;
  return run;
}

// A number of workers per host beyond the slots --include/--exclude kept there would start
// workers that see no device (CUDA_VISIBLE_DEVICES lists the kept slots only); DeepSpeed refuses
// the combination too.
void check_workers_fit_kept_slots(LaunchPlan& plan) {
  std::optional<int64_t> per_host = parse_int(plan.nproc_per_node);
  if (!per_host) return;  // "gpu", "auto", ...: counted on the host, from what it sees
  for (const HostSlots& host : plan.hosts) {
    if (host.kept.empty() || *per_host <= host.workers()) continue;
    plan.problems.push_back(cat("--nproc-per-node ", *per_host, ": ", host.address(), " keeps ",
                                host.workers(), " slots after --include/--exclude"));
    return;
  }
}

}  // namespace

void add_launch_flags(CLI::App& app, LaunchOptions& o) {
  app.add_option("-H,--hosts,--host", o.host_list,
                 "Hosts and their slots: node1:4,node2:4,[fe80::1]:4; given twice, one list "
                 "(default, with no --hostfile: the hosts of the Slurm, PBS or LSF job this runs "
                 "in)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  app.add_option("--hostfile,--machinefile,-f", o.hostfile,
                 "MPI/DeepSpeed hostfile: 'node1 slots=4' (or MPICH's 'node1:4') per line")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  app.add_option("-n,--np", o.total_workers,
                 "Workers in all, as mpirun's -np: the hosts' slots are filled in order")
      ->check(whole_number_within(1, 1 << 24, "a number of workers"));
  app.add_option("-N,--npernode,--ppn", o.per_host,
                 "Workers per host, as mpirun's -N and mpiexec's -ppn (= --nproc-per-node)");
  app.add_option("--include", o.include,
                 "Only these hosts/slots: node1:0,2@node2 (DeepSpeed's form)");
  app.add_option("--exclude", o.exclude, "Leave out these hosts/slots: node1:3@node4");
  app.add_option("-x", o.exports, "Forward NAME (its value here) or set NAME=value on every host")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--secret", o.secrets,
                 "As -x, but the value goes over ssh's stdin with the run's token, never on a "
                 "command line (names with TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL always do)")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--env-file,--env_file", o.env_file,
                 "NAME=value lines set on every host (default: ./.cohort_env, else ~/.cohort_env)");
  app.add_option("--ssh-port,--ssh_port", o.ssh_port, "ssh port of every host")
      ->check(whole_number_within(1, 65535, "a port"));
  app.add_option("--ssh-option,--ssh_option", o.ssh_options,
                 "An ssh -o option, e.g. IdentityFile=~/.ssh/k; wins over the launch's "
                 "own (ServerAliveInterval=5 ...)")
      ->allow_extra_args(false);
  app.add_option("--connect-timeout,--connect_timeout", o.connect_timeout,
                 "Seconds ssh waits for a host")
      ->check(whole_number_within(1, 3600, "seconds"))
      ->capture_default_str();
  app.add_option("--host-retries,--host_retries", o.host_retries,
                 "Times a lost host (ssh gone) is started again while the run goes on without "
                 "it, 1 s, 2 s, 4 s ... (at most 30 s) after each loss; 0: never. Counted "
                 "afresh once the host ran 10 minutes")
      ->check(whole_number_within(0, 1000, "a number of retries"))
      ->capture_default_str();
  app.add_option("--remote-cohort,--remote_cohort", o.remote_cohort,
                 "Path of cohort on the hosts (default: this cohort's own path)");
  app.add_option("--launcher", o.launcher,
                 "How the hosts are started: ssh, or srun (job steps; the default inside a Slurm "
                 "job, for its own hosts). Hosts that are all this machine by name (localhost, "
                 "127.0.0.1) are started without either, unless ssh is asked for");
  app.add_option("--launcher-args,--launcher_args", o.launcher_args,
                 "More words for srun's command line, split as a shell splits them (quotes and "
                 "backslashes; nothing expanded), e.g. '--gres=gpu:8 --comment=\"two words\"'");
  app.add_option("--rdzv-host,--rdzv_host", o.rdzv_host,
                 "Address the hosts use to reach this machine's rendezvous daemon (default: "
                 "127.0.0.1 when every host is local, else this host's name)");
  add_run_flags(app, o.run);
  app.footer(
      "SCRIPT and everything after it are the training script and its arguments, as cohort run "
      "takes\nthem. Every flag has both spellings (--ssh-port, --ssh_port) and may be shortened "
      "to an\nunambiguous prefix (--ssh-p); cohort run's flags also read PET_<NAME> "
      "(PET_MAX_RESTARTS) as\ntheir default.");
}

LaunchPlan plan_launch(const CLI::App& app, const LaunchOptions& options,
                       const LaunchContext& context) {
  LaunchPlan plan;
  HostSelection selection = select_hosts(app, options, context, plan);
  plan.hosts = std::move(selection.hosts);
  plan.problems = std::move(selection.problems);
  RunOptions run = with_workers_per_host(app, options, plan);
  bool per_host_given = given(app, "--nproc-per-node") || given(app, "--npernode");
  apply_total_workers(app, options, per_host_given ? run.nproc_per_node : "", plan);
  forward_environment(options, context, plan);
  check_loopback_mix(app, run, plan);
  keep_token_off_command_lines(plan);
  reject_single_node_flags(app, run, plan);
  check_run_flags(run, context, plan);
  plan_nodes(app, run, plan);
  plan_rendezvous(app, options, context, plan);
  plan_transport(app, options, context, plan);
  plan.ssh.port = options.ssh_port;
  plan.ssh.options = options.ssh_options;
  plan.ssh.connect_timeout_seconds = options.connect_timeout;
  plan.host_retries = plan.transport == Transport::Ssh ? options.host_retries : 0;
  plan.remote_cohort = options.remote_cohort.empty() ? context.own_path : options.remote_cohort;
  plan.own_version = options.run.own_version;
  plan.working_dir = context.working_dir;
  plan.run_flags = forwarded_run_flags(app);
  plan.command = options.run.command;
  if (per_host_given) plan.nproc_per_node = run.nproc_per_node;
  check_workers_fit_kept_slots(plan);
  plan.log_level = log_level_for(options.run);
  return plan;
}

bool is_secret(const LaunchPlan& plan, const std::string& name) {
  return secret_variable_name(name) || plan.secret_names.count(name) > 0;
}

SecretVariables secret_env(const LaunchPlan& plan) {
  SecretVariables secrets;
  for (const auto& [name, value] : plan.env) {
    if (is_secret(plan, name)) secrets.emplace_back(name, value);
  }
  return secrets;
}

std::string forwarded_names(const LaunchPlan& plan) {
  std::string plain, secret;
  for (const auto& [name, value] : plan.env) {
    std::string& list = is_secret(plan, name) ? secret : plain;
    list += (list.empty() ? "" : " ") + name;
  }
  if (plain.empty() && secret.empty()) return "none";
  return plain + (secret.empty() ? "" : (plain.empty() ? "" : "; ") + ("over stdin: " + secret));
}

std::chrono::seconds ready_limit(const LaunchPlan& plan) {
  return std::chrono::seconds(plan.ssh.connect_timeout_seconds + 10);
}

std::chrono::milliseconds token_wait(const LaunchPlan& plan) {
  return ready_limit(plan) + std::chrono::seconds(5);
}

RemoteCommand remote_command(const LaunchPlan& plan, size_t index, const std::string& endpoint,
                             std::chrono::milliseconds launched_ago) {
  const HostSlots& host = plan.hosts[index];
  std::string address = host.address();
  RemoteCommand command;
  command.working_dir = plan.working_dir;
  EnvVars env = plan.env;
  std::string devices = visible_devices(host);
  if (!devices.empty()) env["CUDA_VISIBLE_DEVICES"] = devices;
  env.emplace("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[" + address + ":${rank}]:");
  for (const auto& [name, value] : env) {
    if (!is_secret(plan, name)) command.env.emplace_back(name, value);  // the rest: stdin
  }
  std::string nproc =
      plan.nproc_per_node.empty() ? std::to_string(host.workers()) : plan.nproc_per_node;
  command.argv = {plan.remote_cohort,
                  "run",
                  "--under-launch",
                  "--nnodes",
                  plan.nnodes,
                  "--nproc-per-node",
                  nproc,
                  "--rdzv-backend",
                  "c10d",
                  "--rdzv-endpoint",
                  endpoint,
                  "--rdzv-id",
                  plan.run_id,
                  "--local-addr",
                  address,
                  "--node-rank",
                  std::to_string(index),
                  "--node-rank-hint",
                  "--token-wait-ms",
                  std::to_string(token_wait(plan).count())};
  if (launched_ago.count() > 0) {
    command.argv.push_back("--launched-ms-ago");
    command.argv.push_back(std::to_string(launched_ago.count()));
  }
  command.argv.insert(command.argv.end(), plan.run_flags.begin(), plan.run_flags.end());
  // "--": the host's cohort run drops it and takes the script's words as they are here, a "--"
  // right after the script and a script named "-x.py" included.
  command.argv.push_back("--");
  command.argv.insert(command.argv.end(), plan.command.begin(), plan.command.end());
  return command;
}

std::chrono::seconds rejoin_pause(int attempt) {
  int doublings = std::clamp(attempt - 1, 0, 5);
  return std::min(std::chrono::seconds(1 << doublings), std::chrono::seconds(30));
}

int host_retries_used(int used, std::chrono::milliseconds ran_for) {
  return ran_for >= kHostRetriesResetAfter ? 0 : used;
}

int launch_exit_code(const std::vector<int>& codes_in_exit_order) {
  bool any_finished = false;
  for (int code : codes_in_exit_order) {
    if (code != 0 && code != kSshFailed) return code;
    any_finished = any_finished || code == 0;
  }
  return any_finished || codes_in_exit_order.empty() ? kExitSuccess : kExitUnreachable;
}

}  // namespace cohort
