#include "launcher/slurm/slurm_defaults.hpp"

#include <CLI/CLI.hpp>
#include <climits>

#include "common/text.hpp"
#include "launcher/slurm/slurm_env.hpp"

namespace cohort {
namespace {

// --nnodes MIN:MAX with MIN < MAX: the run goes on with fewer nodes.
bool elastic(const std::string& nnodes) {
  auto colon = nnodes.find(':');
  if (colon == std::string::npos) return false;
  auto min = parse_int(nnodes.substr(0, colon));
  auto max = parse_int(nnodes.substr(colon + 1));
  return min && max && *min < *max;
}

// The rendezvous at the port derived from the job and step refused this node's token: the likely
// cause is another job's rendezvous (another token) on that node and port.
std::string refused_token_hint(const std::string& endpoint) {
  return cat(" (", endpoint,
             " is the endpoint cohort derived from the Slurm job and step: another job or step "
             "likely holds that port; give this step its own with --rdzv-endpoint HOST:PORT)");
}

}  // namespace

SlurmApplied apply_slurm_defaults(const CLI::App& app, RunOptions& options, const EnvMap& env) {
  auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
  // An explicit --master-port wins: the rendezvous is there, on Slurm's first host.
  bool port_given = given("--master-port") && options.master_port > 0;
  std::optional<SlurmDefaults> slurm = slurm_defaults(env, port_given ? options.master_port : 0);
  if (!slurm) return {};
  SlurmApplied applied;
  applied.problems = slurm->problems;
  std::vector<std::string>& taken = applied.taken;
  auto take = [&](const char* flag, const std::optional<SlurmValue>& value, std::string& field) {
    if (!value || given(flag)) return false;
    field = value->value;
    taken.push_back(cat(flag, " ", value->value, " from ", value->source));
    applied.variables[flag] = value->variable;
    return true;
  };
  // --standalone under an srun of several nodes: an independent one-node run on each, as
  // torchrun's, so neither the step's node count nor the node's rank in it applies.
  if (!options.standalone) take("--nnodes", slurm->nnodes, options.nnodes);
  take("--nproc-per-node", slurm->nproc_per_node, options.nproc_per_node);
  bool endpoint_taken = false;
  if (!options.standalone && !given("--rdzv-id"))
    take("--rdzv-id", slurm->rdzv_id, options.rdzv_id);
  if (!options.standalone && !given("--master-addr")) {
    endpoint_taken = take("--rdzv-endpoint", slurm->rdzv_endpoint, options.rdzv_endpoint);
    if (endpoint_taken && port_given) taken.back() += " and --master-port";
  }
  // A node list of three or more and an elastic run: the rendezvous can move when its host is
  // lost, to the next hosts, which the others then reach as well.
  if (endpoint_taken && elastic(options.nnodes)) {
    take("--rdzv-fallback", slurm->rdzv_fallback, options.rdzv_fallback);
  }
  if (endpoint_taken && !port_given)
    applied.refused_token_hint = refused_token_hint(options.rdzv_endpoint);
  if (endpoint_taken && !given("--rdzv-backend")) {
    options.rdzv_backend = "c10d";
    taken.push_back("--rdzv-backend c10d (a Slurm step)");
  }
  std::string node_rank;
  if (!options.standalone && take("--node-rank", slurm->node_rank, node_rank)) {
    std::optional<int64_t> rank = parse_int(node_rank);
    if (!rank || *rank < INT_MIN || *rank > INT_MAX) {
      applied.problems.push_back(
          cat("--node-rank: expected a whole number, got '", node_rank, "'"));
    }
    options.node_rank = static_cast<int>(rank.value_or(0));
    options.node_rank_hint = true;  // c10d honours it too: Slurm's node order
  }
  options.in_slurm_step = true;
  taken.push_back("SIGUSR1/SIGUSR2 not forwarded: Slurm signals every process of the step itself");
  return applied;
}

std::string slurm_origin(const SlurmApplied& applied, const std::string& problem) {
  auto variable = applied.variables.find(flag_named_in(problem));
  if (variable == applied.variables.end()) return "";
  return " (from " + variable->second + " in the environment)";
}

}  // namespace cohort
