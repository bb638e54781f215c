#include "process/worker_cgroups.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/signal_blocking.hpp"
#include "common/text.hpp"
#include "process/fork_exec.hpp"

namespace cohort {
namespace {

constexpr std::chrono::milliseconds kRemovalRetry{20};
constexpr std::chrono::seconds kRemovalPatience{5};

// mountinfo writes space, tab, newline and backslash in paths as \040, \011, \012 and \134.
std::string unescape_mount_path(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      std::string_view digits = text.substr(i + 1, 3);
      bool octal = digits.size() == 3;
      for (char c : digits) octal = octal && c >= '0' && c <= '7';
      if (octal) {
        out +=
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && line[at] == ' ') ++at;
    size_t start = at;
    while (at < line.size() && line[at] != ' ') ++at;
    if (at > start) fields.push_back(line.substr(start, at - start));
  }
  return fields;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool write_text(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t written;
  do {
    written = ::write(fd, text.data(), text.size());
  } while (written < 0 && errno == EINTR);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return written == static_cast<ssize_t>(text.size());
}

// Starts a child in `probe` that exits at once: born there (clone3 CLONE_INTO_CGROUP) when the
// kernel can, else joining it by a write to its cgroup.procs. 0 when it could, else the errno it
// met; `at_birth` says which way worked.
int probe_join(const std::string& probe, bool& at_birth) {
  SignalsBlocked blocked;  // no handler of the agent's runs in the child before it exits
  int directory = ::open(probe.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory < 0) return errno;
  pid_t pid = fork_into_cgroup(directory);
  int error = errno;
  ::close(directory);
  at_birth = pid >= 0;
  if (pid < 0 && error != ENOSYS && error != E2BIG && error != EINVAL) return error;
  int procs = -1;
  if (pid < 0) {  // before Linux 5.7: a child that migrates itself
    procs = ::open((probe + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs < 0) return errno;
    pid = ::fork();
    if (pid < 0) error = errno;
  }
  if (pid == 0) {
    ssize_t written = procs < 0 ? 1 : ::write(procs, "0", 1);
    ::_exit(written == 1 ? 0 : (errno > 0 && errno < 126 ? errno : 125));
  }
  if (procs >= 0) ::close(procs);
  if (pid < 0) return error;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return EIO;
}

// Removes the per-agent directories under `parent` whose agent is gone, as far as they are empty
// (a populated one holds what someone else left; it stays). An agent in another pid namespace
// looks gone from here, but its directory is populated while it has workers.
void remove_abandoned(const std::string& parent) {
  DIR* dir = ::opendir(parent.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> abandoned;
  while (dirent* entry = ::readdir(dir)) {
    std::optional<pid_t> agent = agent_of_cgroup(entry->d_name);
    if (entry->d_type != DT_DIR || !agent) continue;
    if (::kill(*agent, 0) != 0 && errno == ESRCH) abandoned.push_back(parent + "/" + entry->d_name);
  }
  ::closedir(dir);
  for (const std::string& path : abandoned) remove_cgroup(path);
}

}  // namespace

std::string unified_cgroup_path(std::string_view proc_self_cgroup, std::string& why) {
  for (const std::string& line : split(proc_self_cgroup, '\n')) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string path = line.substr(3);
    if (path.empty() || path[0] != '/') break;
    if (path.size() >= 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) {
      why = "this process's cgroup has been removed";
      return {};
    }
    return path;
  }
  why = "no cgroup v2 line (0::) in /proc/self/cgroup";
  return {};
}

std::string cgroup2_directory(std::string_view mountinfo, std::string_view cgroup,
                              std::string& why) {
  bool any_mount = false;
  for (const std::string& line : split(mountinfo, '\n')) {
    std::vector<std::string_view> fields = fields_of(line);
    // id parent major:minor root mount-point options [optional fields...] - type source options
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 5 || dash + 1 >= fields.size() || fields[dash + 1] != "cgroup2") continue;
    any_mount = true;
    std::string root = unescape_mount_path(fields[3]);
    std::string mount_point = unescape_mount_path(fields[4]);
    std::string rest;
    if (root == "/") {
      rest = std::string(cgroup);
    } else if (cgroup == root) {
      rest = "";
    } else if (cgroup.size() > root.size() && cgroup.substr(0, root.size()) == root &&
               cgroup[root.size()] == '/') {
      rest = std::string(cgroup.substr(root.size()));
    } else {
      continue;  // this mount shows another part of the hierarchy
    }
    if (rest == "/") rest.clear();
    if (mount_point == "/" && !rest.empty()) return rest;
    return mount_point + rest;
  }
  why = any_mount ? cat("no cgroup2 mount shows this process's cgroup ", cgroup)
                  : std::string("no cgroup2 file system is mounted");
  return {};
}

std::string own_cgroup_path(std::string& why) {
  return unified_cgroup_path(read_text("/proc/self/cgroup"), why);
}

std::optional<pid_t> agent_of_cgroup(std::string_view name) {
  constexpr std::string_view kPrefix = "cohort-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  size_t dash = name.find('-');
  auto digits = [](std::string_view text) {
    if (text.empty() || text.size() > 9) return false;
    for (char c : text) {
      if (c < '0' || c > '9') return false;
    }
    return true;
  };
  std::string_view pid = name.substr(0, dash);
  if (!digits(pid) || (dash != std::string_view::npos && !digits(name.substr(dash + 1)))) {
    return std::nullopt;
  }
  pid_t value = static_cast<pid_t>(std::stol(std::string(pid)));
  if (value <= 0) return std::nullopt;
  return value;
}

bool kill_cgroup(const std::string& directory) {
  return write_text(directory + "/cgroup.kill", "1");
}

bool freeze_cgroup(const std::string& directory, bool frozen) {
  return write_text(directory + "/cgroup.freeze", frozen ? "1" : "0");
}

bool remove_cgroup(const std::string& directory) {
  if (DIR* dir = ::opendir(directory.c_str())) {
    std::vector<std::string> below;
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == ".." || entry->d_type != DT_DIR) continue;
      below.push_back(directory + "/" + name);
    }
    ::closedir(dir);
    for (const std::string& child : below) remove_cgroup(child);
  }
  return ::rmdir(directory.c_str()) == 0 || errno == ENOENT;
}

std::unique_ptr<WorkerCgroups> WorkerCgroups::create(boost::asio::io_context& io,
                                                     std::string& why) {
  if (const char* off = std::getenv("COHORT_NO_CGROUP");
      off != nullptr && *off != '\0' && std::strcmp(off, "0") != 0) {
    why = "COHORT_NO_CGROUP is set";
    return nullptr;
  }
  std::string own = own_cgroup_path(why);
  if (own.empty()) return nullptr;
  std::string parent = cgroup2_directory(read_text("/proc/self/mountinfo"), own, why);
  if (parent.empty()) return nullptr;

  remove_abandoned(parent);
  std::string directory;
  std::string base = cat(parent, "/cohort-", ::getpid());
  for (int attempt = 1; directory.empty(); ++attempt) {
    std::string candidate = attempt == 1 ? base : cat(base, "-", attempt);
    if (::mkdir(candidate.c_str(), 0755) == 0) {
      directory = candidate;
    } else if (errno != EEXIST || attempt == 10) {
      why = cat("cannot create ", candidate, ": ", std::strerror(errno));
      return nullptr;
    }
  }
  auto failed = [&](std::string reason) {
    why = std::move(reason);
    remove_cgroup(directory);
    return nullptr;
  };
  if (::access((directory + "/cgroup.kill").c_str(), W_OK) != 0) {
    return failed(cat("no writable cgroup.kill in ", directory, " (Linux 5.14 or later has it)"));
  }
  // What a worker will do: join a cgroup below the directory from a child of this process.
  std::string probe = directory + "/probe";
  if (::mkdir(probe.c_str(), 0755) != 0) {
    return failed(cat("cannot create ", probe, ": ", std::strerror(errno)));
  }
  bool at_birth = false;
  if (int error = probe_join(probe, at_birth); error != 0) {
    return failed(cat("a child cannot join ", probe, ": ", std::strerror(error)));
  }
  // The probe child has exited; its cgroup empties at once, or very soon.
  for (int attempt = 0; !remove_cgroup(probe) && attempt < 100; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<WorkerCgroups>(new WorkerCgroups(io, directory, at_birth));
}

WorkerCgroups::WorkerCgroups(boost::asio::io_context& io, std::string directory, bool at_birth)
    : directory_(std::move(directory)), joins_at_birth_(at_birth), removal_timer_(io) {}

WorkerCgroups::~WorkerCgroups() {
  removal_timer_.cancel();
  kill_cgroup(directory_);
  // What was killed is gone within milliseconds; the keeper removes what is still there later.
  for (int attempt = 0; !remove_cgroup(directory_) && attempt < 100; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string WorkerCgroups::path_of(int group) const { return cat(directory_, "/group-", group); }

int WorkerCgroups::make_group() {
  int group = ++next_group_;
  if (::mkdir(path_of(group).c_str(), 0755) != 0) return 0;
  return group;
}

int WorkerCgroups::open_directory(int group) const {
  return ::open(path_of(group).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int WorkerCgroups::open_procs(int group) const {
  return ::open((path_of(group) + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
}

void WorkerCgroups::kill(int group) const { kill_cgroup(path_of(group)); }

bool WorkerCgroups::freeze(int group, bool frozen) const {
  return freeze_cgroup(path_of(group), frozen);
}

void WorkerCgroups::remove(int group) {
  std::string path = path_of(group);
  kill_cgroup(path);
  if (remove_cgroup(path)) return;
  removing_[path] = std::chrono::steady_clock::now() + kRemovalPatience;
  if (removing_.size() == 1) retry_removals();
}

void WorkerCgroups::retry_removals() {
  removal_timer_.expires_after(kRemovalRetry);
  removal_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error) return;
    auto now = std::chrono::steady_clock::now();
    for (auto it = removing_.begin(); it != removing_.end();) {
      if (remove_cgroup(it->first) || now > it->second) {
        it = removing_.erase(it);
      } else {
        ++it;
      }
    }
    if (!removing_.empty()) retry_removals();
  });
}

}  // namespace cohort
