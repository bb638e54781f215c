// Data-parallel training in C++ with LibTorch's c10d, the counterpart of
// examples/python/train_ddp.py: the store and ranks come from the launcher's environment
// (cohort run or torchrun), Gloo on CPU or NCCL on CUDA (each where this LibTorch has it: the
// PyTorch wheels ship no Gloo headers, and then CPU training is refused), parameters broadcast
// from rank 0, gradients all-reduced in flattened buckets, a sharded sampler reshuffled per epoch,
// atomic rank-0 checkpoints with resume, a clean stop on SIGTERM, the backend shut down at the
// end as destroy_process_group() does, and fault injection for tests.
// Guide: docs/guide/libtorch-ddp.md.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>  // c10d::Backend too, in 2.x
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// Gloo where its headers are: Debian's libtorch-dev has them, the PyTorch wheels' LibTorch not.
#if __has_include(<gloo/algorithm.h>)
#define COHORT_EXAMPLE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#else
#define COHORT_EXAMPLE_GLOO 0
#endif

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cohort/heartbeat.hpp"  // include/: heartbeats for cohort run --hang-timeout

namespace {

// The collectives' common base: c10d::ProcessGroup in PyTorch 1.x, c10d::Backend from 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
using Collectives = c10d::Backend;
#else
using Collectives = c10d::ProcessGroup;
#endif

// ProcessGroupNCCL::shutdown(), the C++ side of destroy_process_group(): from PyTorch 2.4 on, a
// group destroyed without it warns that destroy_process_group() was not called.
#define COHORT_EXAMPLE_NCCL_SHUTDOWN \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

constexpr int64_t kInFeatures = 16;
constexpr int64_t kTeacherHidden = 32;

// The command line (kUsage); the same flags, defaults and meaning as examples/python/train_ddp.py.
struct Options {
  int64_t epochs = 4;
  int64_t steps_per_epoch = 50;
  int64_t global_batch_size = 32;  // samples per optimizer step over all ranks
  int64_t hidden = 64;
  double lr = 0.05;
  double momentum = 0.9;
  int64_t seed = 0;
  std::string device = "auto";  // auto, cpu or cuda
  int64_t accumulate = 1;       // micro-batches per optimizer step
  int64_t bucket_cap_kb = 25 * 1024;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 10;
  int64_t log_every = 10;
  std::string step_log;
  std::string dump_params;
  double step_sleep = 0;  // seconds
  int64_t timeout_s = 300;
  std::optional<int64_t> fail_at_step;  // fault injection, first attempt only
  int64_t fail_rank = 0;
  int fail_exit_code = 1;
  std::string fail_signal;
};

const char* kUsage = R"(usage: train_ddp [--epochs N] [--steps-per-epoch N] [--global-batch-size N]
  [--hidden N] [--lr X] [--momentum X] [--seed N] [--device auto|cpu|cuda] [--accumulate N]
  [--bucket-cap-kb N] [--checkpoint-dir DIR] [--checkpoint-every N] [--log-every N]
  [--step-log FILE] [--dump-params FILE] [--step-sleep SECONDS] [--timeout-s N]
  [--fail-at-step K --fail-rank R (--fail-exit-code C | --fail-signal SIG)]
Run under cohort run or torchrun (they set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...).
)";

int signal_number(const std::string& text);

Options parse_options(int argc, char** argv) {
  Options o;
  std::map<std::string, std::function<void(const std::string&)>> flags{
      {"epochs", [&](const std::string& v) { o.epochs = std::stoll(v); }},
      {"steps-per-epoch", [&](const std::string& v) { o.steps_per_epoch = std::stoll(v); }},
      {"global-batch-size", [&](const std::string& v) { o.global_batch_size = std::stoll(v); }},
      {"hidden", [&](const std::string& v) { o.hidden = std::stoll(v); }},
      {"lr", [&](const std::string& v) { o.lr = std::stod(v); }},
      {"momentum", [&](const std::string& v) { o.momentum = std::stod(v); }},
      {"seed", [&](const std::string& v) { o.seed = std::stoll(v); }},
      {"device", [&](const std::string& v) { o.device = v; }},
      {"accumulate", [&](const std::string& v) { o.accumulate = std::stoll(v); }},
      {"bucket-cap-kb", [&](const std::string& v) { o.bucket_cap_kb = std::stoll(v); }},
      {"checkpoint-dir", [&](const std::string& v) { o.checkpoint_dir = v; }},
      {"checkpoint-every", [&](const std::string& v) { o.checkpoint_every = std::stoll(v); }},
      {"log-every", [&](const std::string& v) { o.log_every = std::stoll(v); }},
      {"step-log", [&](const std::string& v) { o.step_log = v; }},
      {"dump-params", [&](const std::string& v) { o.dump_params = v; }},
      {"step-sleep", [&](const std::string& v) { o.step_sleep = std::stod(v); }},
      {"timeout-s", [&](const std::string& v) { o.timeout_s = std::stoll(v); }},
      {"fail-at-step", [&](const std::string& v) { o.fail_at_step = std::stoll(v); }},
      {"fail-rank", [&](const std::string& v) { o.fail_rank = std::stoll(v); }},
      {"fail-exit-code", [&](const std::string& v) { o.fail_exit_code = std::stoi(v); }},
      {"fail-signal", [&](const std::string& v) { o.fail_signal = v; }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    std::string name = arg.rfind("--", 0) == 0 ? arg.substr(2) : "";
    std::optional<std::string> value;
    if (size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    auto flag = flags.find(name);
    if (flag == flags.end()) throw std::invalid_argument("unknown argument " + arg);
    if (!value) {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      value = argv[++i];
    }
    flag->second(*value);
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    throw std::invalid_argument("--device must be auto, cpu or cuda");
  }
  if (o.epochs < 0 || o.steps_per_epoch < 1 || o.global_batch_size < 1 || o.accumulate < 1 ||
      o.checkpoint_every < 1 || o.log_every < 1 || o.bucket_cap_kb < 1) {
    throw std::invalid_argument("counts and sizes must be positive");
  }
  if (!o.fail_signal.empty()) signal_number(o.fail_signal);  // throws on an unknown name
  return o;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

int env_int(const char* name, int fallback) {
  return std::stoi(env_or(name, std::to_string(fallback)));
}

// SIGTERM and SIGINT only set a flag; the training loop acts on it at a step boundary.
volatile std::sig_atomic_t stop_requested = 0;

void install_stop_handler() {
  struct sigaction action {};
  action.sa_handler = [](int) { stop_requested = 1; };
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

// "SIGKILL", "KILL" or "9".
int signal_number(const std::string& text) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) return std::stoi(text);
  static const std::map<std::string, int> kSignals{
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"ABRT", SIGABRT},
      {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"SEGV", SIGSEGV}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
      {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"BUS", SIGBUS}};
  auto found = kSignals.find(text.rfind("SIG", 0) == 0 ? text.substr(3) : text);
  if (found == kSignals.end()) throw std::invalid_argument("unknown signal " + text);
  return found->second;
}

// The environment the launcher gives every worker.
struct Worker {
  int rank = env_int("RANK", 0);
  int world_size = env_int("WORLD_SIZE", 1);
  int local_rank = env_int("LOCAL_RANK", 0);
  int restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0);
};

// The store, as PyTorch 1.13's env:// does it: with TORCHELASTIC_USE_AGENT_STORE=True every rank
// is a client of the launcher's store (cohort hosts a fresh one per round) under the
// "/worker/attempt_<restart count>" prefix; otherwise rank 0 hosts a TCPStore on MASTER_PORT.
c10::intrusive_ptr<c10d::Store> connect_store(const Worker& worker, std::chrono::seconds timeout) {
  bool agent_store = env_or("TORCHELASTIC_USE_AGENT_STORE", "False") == "True";
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env_int("MASTER_PORT", 29500));
  options.isServer = !agent_store && worker.rank == 0;
  options.numWorkers = worker.world_size;
  options.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  // libuv is a server backend, on by default from 2.4 and refused by builds without it (Debian
  // 13's): a client does the same without it.
  if (!options.isServer) options.useLibUV = false;
#endif
  auto store = c10::make_intrusive<c10d::TCPStore>(env_or("MASTER_ADDR", "127.0.0.1"), options);
  if (!agent_store) return store;
  return c10::make_intrusive<c10d::PrefixStore>(
      "/worker/attempt_" + std::to_string(worker.restart_count), store);
}

// Why this LibTorch cannot train on `device`, or "" when it can.
std::string backend_problem(const torch::Device& device) {
  if (device.is_cpu()) {
#if COHORT_EXAMPLE_GLOO
    return "";
#else
    return "training on the CPU needs Gloo, and this LibTorch has no Gloo headers "
           "(gloo/algorithm.h; the PyTorch wheels ship none): build against a LibTorch with "
           "them (Debian's libtorch-dev has them) or train on CUDA with NCCL";
#endif
  }
#ifdef USE_C10D_NCCL
  return "";
#else
  return COHORT_EXAMPLE_GLOO ? "this LibTorch was built without NCCL: use --device cpu"
                             : "this LibTorch was built without NCCL and has no Gloo headers: it "
                               "cannot train";
#endif
}

#if COHORT_EXAMPLE_GLOO
// Gloo on the interfaces of GLOO_SOCKET_IFNAME (comma-separated), like PyTorch, else by hostname.
c10::intrusive_ptr<Collectives> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                          const Worker& worker, std::chrono::seconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  std::stringstream interfaces(env_or("GLOO_SOCKET_IFNAME", ""));
  for (std::string name; std::getline(interfaces, name, ',');) {
    if (!name.empty())
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
  }
  if (options->devices.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, worker.rank, worker.world_size,
                                                     options);
}
#endif

// Gloo on CPU, NCCL on CUDA; backend_problem(device) must have said "".
c10::intrusive_ptr<Collectives> make_collectives(
    [[maybe_unused]] const c10::intrusive_ptr<c10d::Store>& store,
    [[maybe_unused]] const Worker& worker, torch::Device device,
    [[maybe_unused]] std::chrono::seconds timeout) {
#if COHORT_EXAMPLE_GLOO
  if (device.is_cpu()) return make_gloo(store, worker, timeout);
#endif
#ifdef USE_C10D_NCCL
  if (device.is_cuda()) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, worker.rank, worker.world_size,
                                                       options);
  }
#endif
  throw std::logic_error(backend_problem(device));
}

void wait(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

// The clean end of training: a barrier, then the backend shut down as destroy_process_group()
// does (NCCL's, from PyTorch 2.4 on; Gloo's and 1.13's need nothing before their destructor).
void finish(Collectives& collectives, [[maybe_unused]] const torch::Device& device) {
  wait(collectives.barrier());
#if defined(USE_C10D_NCCL) && COHORT_EXAMPLE_NCCL_SHUTDOWN
  if (device.is_cuda()) static_cast<c10d::ProcessGroupNCCL&>(collectives).shutdown();
#endif
}

// Flattens tensors into buckets of at most cap bytes (a tensor larger than cap gets its own).
std::vector<std::vector<torch::Tensor>> make_buckets(const std::vector<torch::Tensor>& tensors,
                                                     int64_t cap_bytes) {
  std::vector<std::vector<torch::Tensor>> buckets;
  int64_t bytes = 0;
  for (const auto& tensor : tensors) {
    int64_t size = tensor.numel() * static_cast<int64_t>(tensor.element_size());
    if (buckets.empty() || (bytes > 0 && bytes + size > cap_bytes)) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(tensor);
    bytes += size;
  }
  return buckets;
}

torch::Tensor flatten(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> views;
  for (const auto& tensor : tensors) views.push_back(tensor.reshape({-1}));
  return torch::cat(views);
}

void unflatten_into(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& tensor : tensors) {
    tensor.copy_(flat.slice(0, offset, offset + tensor.numel()).view_as(tensor));
    offset += tensor.numel();
  }
}

// Rank 0's parameters everywhere, as DistributedDataParallel does at construction.
void broadcast_parameters(Collectives& collectives, const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat{flatten(params)};
  wait(collectives.broadcast(flat));
  unflatten_into(flat[0], params);
}

// Averages the gradients over all ranks: one all-reduce per bucket, all buckets in flight at once,
// last layers first (the order in which backward produces them).
void average_gradients(Collectives& collectives, const std::vector<torch::Tensor>& params,
                       int64_t cap_bytes, int world_size) {
  std::vector<torch::Tensor> grads;
  for (auto it = params.rbegin(); it != params.rend(); ++it) grads.push_back(it->grad());
  auto buckets = make_buckets(grads, cap_bytes);
  std::vector<std::vector<torch::Tensor>> flats;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  flats.reserve(buckets.size());
  for (const auto& bucket : buckets) {
    flats.push_back({flatten(bucket)});
    works.push_back(collectives.allreduce(flats.back()));
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    wait(works[i]);
    unflatten_into(flats[i][0].div_(world_size), buckets[i]);
  }
}

double all_reduce_sum(Collectives& collectives, double value, torch::Device device) {
  std::vector<torch::Tensor> tensor{
      torch::tensor({value}, torch::dtype(torch::kFloat64).device(device))};
  wait(collectives.allreduce(tensor));
  return tensor[0].item<double>();
}

// True on every rank once any rank was asked to stop, so that all stop at the same step.
bool stop_agreed(Collectives& collectives, torch::Device device) {
  std::vector<torch::Tensor> flag{torch::tensor({static_cast<int64_t>(stop_requested)},
                                                torch::dtype(torch::kLong).device(device))};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  wait(collectives.allreduce(flag, options));
  return flag[0].item<int64_t>() != 0;
}

// Inputs ~ N(0, 1); targets from a fixed random two-layer tanh network, plus a little noise.
struct Dataset {
  torch::Tensor x, y;
};

Dataset make_dataset(int64_t samples, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  Dataset data;
  data.x = torch::randn({samples, kInFeatures}, gen);
  auto w1 = torch::randn({kInFeatures, kTeacherHidden}, gen) / std::sqrt(double(kInFeatures));
  auto w2 = torch::randn({kTeacherHidden, 1}, gen) / std::sqrt(double(kTeacherHidden));
  data.y = torch::tanh(data.x.matmul(w1)).matmul(w2) + 0.01 * torch::randn({samples, 1}, gen);
  return data;
}

// The epoch's order of samples: a permutation from seed + epoch, the same on every rank.
// Step b of the epoch trains on the global batch order[b*G, (b+1)*G), and rank r takes its slice
// [r*B, (r+1)*B) of it (B = G / world size): the same global batches at any world size.
torch::Tensor epoch_order(int64_t samples, int64_t seed, int64_t epoch) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed + epoch));
  return torch::randperm(samples, gen, torch::kLong);
}

torch::Tensor rank_batch(const torch::Tensor& order, int64_t step_in_epoch, int64_t global_batch,
                         const Worker& worker) {
  int64_t per_rank = global_batch / worker.world_size;
  int64_t start = step_in_epoch * global_batch + worker.rank * per_rank;
  return order.slice(0, start, start + per_rank);
}

torch::nn::Sequential make_model(int64_t hidden, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));  // the same initial weights everywhere
  return torch::nn::Sequential(torch::nn::Linear(kInFeatures, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, 1));
}

// What a checkpoint restores besides the model and the optimizer.
struct TrainState {
  int64_t step = 0;  // the next step to run
  double loss = std::nan("");
};

// Writes a temporary file and renames it over the old one, so a reader never sees half a file.
void save_checkpoint(const std::string& path, const torch::nn::Sequential& model,
                     const torch::optim::SGD& optimizer, const TrainState& state,
                     int64_t steps_per_epoch) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model->save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("epoch", c10::IValue(state.step / steps_per_epoch));
  archive.write("step", c10::IValue(state.step));
  archive.write("loss", c10::IValue(state.loss));
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  archive.save_to(tmp);
  std::filesystem::rename(tmp, path);
}

bool load_checkpoint(const std::string& path, torch::nn::Sequential& model,
                     torch::optim::SGD& optimizer, TrainState& state, torch::Device device) {
  if (!std::filesystem::exists(path)) return false;
  torch::serialize::InputArchive archive, model_archive, optimizer_archive;
  archive.load_from(path, device);
  archive.read("model", model_archive);
  archive.read("optimizer", optimizer_archive);
  model->load(model_archive);
  optimizer.load(optimizer_archive);
  c10::IValue step, loss;
  archive.read("step", step);
  archive.read("loss", loss);
  state.step = step.toInt();
  state.loss = loss.toDouble();
  return true;
}

void maybe_fail(const Options& options, const Worker& worker, int64_t step) {
  if (options.fail_at_step != step || options.fail_rank != worker.rank ||
      worker.restart_count != 0) {
    return;
  }
  std::cout.flush();
  if (!options.fail_signal.empty()) {
    int sig = signal_number(options.fail_signal);
    std::cerr << "rank " << worker.rank << ": injected failure at step " << step << ": signal "
              << sig << std::endl;
    std::signal(sig, SIG_DFL);
    ::kill(::getpid(), sig);
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  std::cerr << "rank " << worker.rank << ": injected failure at step " << step << ": exit "
            << options.fail_exit_code << std::endl;
  std::_Exit(options.fail_exit_code);  // a crash: no clean-up
}

int train(const Options& options) {
  Worker worker;
  if (options.global_batch_size % (worker.world_size * options.accumulate) != 0) {
    std::cerr << "--global-batch-size " << options.global_batch_size
              << " is not a multiple of world size " << worker.world_size << " x --accumulate "
              << options.accumulate << "\n";
    return 2;
  }
  bool use_cuda =
      options.device == "cuda" || (options.device == "auto" && torch::cuda::is_available());
  torch::Device device =
      use_cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(worker.local_rank))
               : torch::Device(torch::kCPU);
  if (std::string problem = backend_problem(device); !problem.empty()) {
    std::cerr << "train_ddp: " << problem << "\n";
    return 2;
  }
#ifdef USE_C10D_NCCL
  if (use_cuda) c10::cuda::set_device(static_cast<c10::DeviceIndex>(worker.local_rank));
#endif
  auto timeout = std::chrono::seconds(options.timeout_s);
  auto store = connect_store(worker, timeout);
  auto collectives = make_collectives(store, worker, device, timeout);
  const bool rank0 = worker.rank == 0;

  auto model = make_model(options.hidden, options.seed);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(options.lr).momentum(options.momentum));

  // Resume: every rank reads the latest checkpoint (rank 0 wrote it, maybe on another node).
  TrainState state;
  std::string path;
  bool resumed = false;
  if (!options.checkpoint_dir.empty()) {
    path = options.checkpoint_dir + "/checkpoint.pt";
    resumed = load_checkpoint(path, model, optimizer, state, device);
    if (!resumed && rank0) std::filesystem::create_directories(options.checkpoint_dir);
  }
  if (rank0) {
    std::cout << "round " << worker.restart_count << ": world size " << worker.world_size << ", "
              << (resumed ? "resumed from " + path + " at step " + std::to_string(state.step)
                          : std::string("starting from scratch"))
              << std::endl;
  }
  std::vector<torch::Tensor> params = model->parameters();
  broadcast_parameters(*collectives, params);
  auto checkpoint = [&] {
    if (rank0 && !path.empty()) {
      save_checkpoint(path, model, optimizer, state, options.steps_per_epoch);
    }
  };

  Dataset data = make_dataset(options.steps_per_epoch * options.global_batch_size, options.seed);
  std::ofstream step_log;
  if (rank0 && !options.step_log.empty()) step_log.open(options.step_log, std::ios::app);
  step_log << std::setprecision(9);
  const int64_t total_steps = options.epochs * options.steps_per_epoch;
  const int64_t cap_bytes = options.bucket_cap_kb * 1024;
  torch::Tensor order;
  int64_t order_epoch = -1;

  while (state.step < total_steps) {
    if (stop_agreed(*collectives, device)) {
      checkpoint();
      if (rank0)
        std::cout << "stop requested: checkpoint at step " << state.step << ", exiting"
                  << std::endl;
      finish(*collectives, device);
      return 0;
    }
    maybe_fail(options, worker, state.step);

    const int64_t epoch = state.step / options.steps_per_epoch;
    if (epoch != order_epoch) {  // a new shuffle per epoch
      order = epoch_order(data.x.size(0), options.seed, epoch);
      order_epoch = epoch;
    }
    torch::Tensor index =
        rank_batch(order, state.step % options.steps_per_epoch, options.global_batch_size, worker);
    torch::Tensor x = data.x.index_select(0, index).to(device);
    torch::Tensor y = data.y.index_select(0, index).to(device);

    optimizer.zero_grad();
    double local_loss = 0;
    auto xs = x.chunk(options.accumulate), ys = y.chunk(options.accumulate);
    for (size_t i = 0; i < xs.size(); ++i) {  // gradient accumulation over micro-batches
      torch::Tensor loss = torch::mse_loss(model->forward(xs[i]), ys[i]) / options.accumulate;
      loss.backward();
      local_loss += loss.item<double>();
    }
    average_gradients(*collectives, params, cap_bytes, worker.world_size);
    optimizer.step();
    cohort::heartbeat::beat(state.step);  // a sign of life for cohort run --hang-timeout

    state.loss = all_reduce_sum(*collectives, local_loss, device) / worker.world_size;
    if (step_log.is_open()) {
      step_log << worker.restart_count << ' ' << state.step << ' ' << state.loss << ' '
               << worker.world_size << std::endl;
    }
    if (rank0 && (state.step % options.log_every == 0 || state.step == total_steps - 1)) {
      std::cout << "epoch " << epoch << " step " << state.step << " loss " << std::fixed
                << std::setprecision(6) << state.loss << std::defaultfloat << std::endl;
    }
    ++state.step;
    if (state.step % options.checkpoint_every == 0) checkpoint();
    if (options.step_sleep > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(options.step_sleep));
    }
  }

  checkpoint();
  if (rank0) {
    if (!options.dump_params.empty()) {
      std::ofstream out(options.dump_params);
      out << std::setprecision(9);
      for (const auto& param : params) {
        torch::Tensor flat = param.detach().to(torch::kCPU).reshape({-1}).contiguous();
        for (int64_t i = 0; i < flat.numel(); ++i) out << flat[i].item<float>() << '\n';
      }
    }
    std::cout << "done: " << state.step << " steps, final loss " << std::fixed
              << std::setprecision(6) << state.loss << std::endl;
  }
  finish(*collectives, device);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  install_stop_handler();
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "train_ddp: " << error.what() << "\n" << kUsage;
    return 2;
  }
  try {
    return train(options);
  } catch (const std::exception& error) {
    // A peer that died makes the collectives throw; the launcher then restarts the group.
    std::cerr << "train_ddp: rank " << env_or("RANK", "?") << ": "
              << (stop_requested ? "stopping: " : "") << error.what() << "\n";
    return 1;
  }
}
