// `cohort launch`'s command line and what it turns into: the hosts and their worker counts, the
// ssh settings, the environment every host gets, the `cohort run` line each host runs (its own
// flags plus every run flag the user gave), and where the rendezvous lives. Also the rule that
// turns the hosts' exit codes into the launch's. Main thread, at start; pure but for reading
// the hostfile and env file.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "launcher/launch/forwarded_env.hpp"
#include "launcher/launch/hostfile.hpp"
#include "launcher/launch/srun_command.hpp"
#include "launcher/launch/ssh_command.hpp"
#include "launcher/options/cli_fwd.hpp"
#include "launcher/options/run_options.hpp"
#include "launcher/tokens/launch_token.hpp"
#include "rendezvous/daemon_options.hpp"

namespace cohort {

struct LaunchOptions {
  std::string host_list;  ///< -H (also mpirun's --host, -host, -hosts)
  std::string hostfile;   ///< also mpirun's -hostfile, --machinefile, -machinefile, -f
  int total_workers = 0;  ///< mpirun's -np / -n: fill the hosts' slots in order; 0: every slot
  std::string per_host;   ///< mpirun's -N / --npernode / -ppn: --nproc-per-node by another name
  std::string include;
  std::string exclude;
  std::vector<std::string> exports;  ///< -x NAME or NAME=value
  std::vector<std::string> secrets;  ///< --secret NAME or NAME=value: as -x, over stdin only
  std::string env_file;              ///< empty: ./.cohort_env, else ~/.cohort_env, if there
  int ssh_port = 0;
  std::vector<std::string> ssh_options;
  int connect_timeout = 10;
  int host_retries = 10;      ///< a lost host is started again this many times at most
  std::string remote_cohort;  ///< empty: this cohort's own path
  std::string rdzv_host;      ///< address the hosts use to reach the embedded daemon
  std::string launcher;       ///< "ssh" or "srun"; empty: srun inside a Slurm job, else ssh
  std::string launcher_args;  ///< more words for srun's command line
  RunOptions run;
};

/// What the launch needs from its surroundings (given, so that planning stays testable).
struct LaunchContext {
  EnvVars env;              ///< the launching environment
  std::string working_dir;  ///< kept on every host
  std::string own_path;     ///< this cohort binary
  std::string home;         ///< for ~/.cohort_env
  std::string host_name;    ///< this machine's: the hosts reach the embedded daemon by it
  bool has_srun = false;    ///< srun is in PATH
};

/// How the hosts' agents are started: over ssh, as steps of the Slurm job the launch runs in, or,
/// when every host is this machine by name (localhost, 127.0.0.1, ::1), by its own shell.
enum class Transport { Ssh, Srun, Local };

struct LaunchPlan {
  std::vector<HostSlots> hosts;
  std::string hosts_source;  ///< "-H", "--hostfile FILE" or the allocation's, for the log
  std::string scheduler;     ///< "Slurm", "PBS" or "LSF" when the hosts are its allocation's
  Transport transport = Transport::Ssh;
  SshSettings ssh;
  SrunSettings srun;
  std::string remote_cohort;
  std::string own_version;             ///< this cohort's --version; each host's agent says its own
  EnvVars env;                         ///< forwarded to every host
  std::set<std::string> secret_names;  ///< --secret's: sent as secrets, whatever their names
  std::string working_dir;
  std::vector<std::string> run_flags;  ///< the user's cohort run flags, forwarded as given
  std::vector<std::string> command;    ///< the training script and its arguments
  std::string nnodes;                  ///< "3" or "2:3"
  int min_nodes = 1;
  std::string nproc_per_node;  ///< the user's --nproc-per-node; empty: each host's slots
  std::string run_id;
  std::string rdzv_endpoint;  ///< a running cohortd (host:port); empty: the embedded daemon
  std::string rdzv_host;      ///< embedded: the address the hosts connect to
  DaemonOptions daemon;       ///< embedded: where it listens (and its token, = `token`)
  /// The run's token (the user's, or one launch_command generates for the embedded daemon):
  /// the first line each host's ssh stdin carries (launcher/launch_token.*). Empty: none.
  std::string token;
  std::chrono::milliseconds shutdown_timeout{30000};
  /// Times a lost host's agent is started again (over ssh) while the run goes on; 0 with srun.
  int host_retries = 10;
  log::Level log_level = log::Level::Warn;
  std::vector<std::string> problems;  ///< each names its flag, or FILE:LINE
};

/// Adds `cohort launch`'s own flags, then every `cohort run` flag, to `app`.
void add_launch_flags(CLI::App& app, LaunchOptions& options);

/// Validates the parsed command line (`app` tells which run flags were given) into a plan.
LaunchPlan plan_launch(const CLI::App& app, const LaunchOptions& options,
                       const LaunchContext& context);

/// How long the launch waits for every host's agent to say it is ready (ssh's connect timeout,
/// plus 10 s for the login and the agent's start) before it gives up and starts nothing.
std::chrono::seconds ready_limit(const LaunchPlan& plan);

/// How long each agent waits for its token line: the ready limit and 5 s more, since the launch
/// writes it only once the last host is ready.
std::chrono::milliseconds token_wait(const LaunchPlan& plan);

/// The line host `index` runs, given the rendezvous endpoint "host:port" the agents connect to;
/// `launched_ago` (a lost host started again): how long ago the launch started the job. Its
/// environment leaves out the forwarded variables whose names say they are secret.
RemoteCommand remote_command(const LaunchPlan& plan, size_t index, const std::string& endpoint,
                             std::chrono::milliseconds launched_ago = {});

/// For -v: the names (never the values) of the variables every host gets, the secret ones
/// apart: "CUDA_HOME NCCL_DEBUG; over stdin: HF_TOKEN", or "none".
std::string forwarded_names(const LaunchPlan& plan);

/// Whether the forwarded variable `name` is a secret: its name says so (secret_variable_name),
/// or --secret named it.
bool is_secret(const LaunchPlan& plan, const std::string& name);

/// The forwarded variables that are secrets (is_secret): they follow
/// the token over each host's stdin instead (secrets_line).
SecretVariables secret_env(const LaunchPlan& plan);

/// The launch's exit code from each host's (ssh's) exit code, in the order they ended: the first
/// that is neither 0 nor 255 (the run's root cause: every agent exits with it), else 0 if any
/// host finished, else kExitUnreachable (ssh's 255 everywhere: every host was lost).
int launch_exit_code(const std::vector<int>& codes_in_exit_order);

/// The pause before a lost host's `attempt`-th start again (1, 2, ...): 1 s, doubling, 30 s at
/// most.
std::chrono::seconds rejoin_pause(int attempt);

/// How long a host started again must then run for its --host-retries to start over: a host
/// lost once a week in a month-long job is not used up by the fourth week (as Kubernetes resets
/// a container's restart backoff after 10 minutes of running).
constexpr std::chrono::minutes kHostRetriesResetAfter{10};

/// The times a host lost after running `ran_for` counts as started again so far: `used`, or 0
/// once it ran for kHostRetriesResetAfter.
int host_retries_used(int used, std::chrono::milliseconds ran_for);

/// ssh's exit code when the connection failed or the remote side was killed.
constexpr int kSshFailed = 255;

}  // namespace cohort
