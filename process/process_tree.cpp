#include "process/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <set>
#include <string>
#include <unordered_map>

namespace cohort {
namespace {

// Reads the next space-separated field of `text` from `at` on.
std::string_view next_field(std::string_view text, size_t& at) {
  while (at < text.size() && text[at] == ' ') ++at;
  size_t start = at;
  while (at < text.size() && text[at] != ' ' && text[at] != '\n') ++at;
  return text.substr(start, at - start);
}

template <typename Number>
bool parse_number(std::string_view text, Number& value) {
  if (text.empty()) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

// What is below `roots`, breadth first so that parents come before their children, given each
// process's children; `spared` and what is below it are left out.
template <typename ChildrenOf>
std::vector<pid_t> walk_down(const std::vector<pid_t>& roots, pid_t spared,
                             ChildrenOf children_of) {
  std::set<pid_t> seen(roots.begin(), roots.end());
  std::vector<pid_t> found;
  std::vector<pid_t> parents;
  for (pid_t root : roots) {
    if (root != spared) parents.push_back(root);
  }
  while (!parents.empty()) {
    std::vector<pid_t> next;
    for (pid_t parent : parents) {
      for (pid_t child : children_of(parent)) {
        if (child == spared || !seen.insert(child).second) continue;
        found.push_back(child);
        next.push_back(child);
      }
    }
    parents = std::move(next);
  }
  return found;
}

// Whether the kernel has /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN): asked once.
bool children_files() {
  static const bool present = ::access("/proc/thread-self/children", R_OK) == 0;
  return present;
}

// A small /proc file, whole; empty when it cannot be read.
std::string read_whole(const std::string& path) {
  std::string text;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (;;) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

// Appends the space-separated numbers of `text` ("12 13 14 ") to `numbers`.
void append_numbers(std::string_view text, std::vector<pid_t>& numbers) {
  for (size_t at = 0; at < text.size();) {
    pid_t number = 0;
    if (parse_number(next_field(text, at), number) && number > 0) numbers.push_back(number);
    ++at;
  }
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  // The command name is in parentheses and may hold anything, ')' included: the last ')' ends it.
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  ProcStat stat;
  std::string_view pid_text = text.substr(0, open);
  while (!pid_text.empty() && pid_text.back() == ' ') pid_text.remove_suffix(1);
  if (!parse_number(pid_text, stat.pid)) return std::nullopt;
  size_t at = close + 1;
  std::string_view state = next_field(text, at);  // field 3
  if (state.size() != 1) return std::nullopt;
  stat.state = state[0];
  if (!parse_number(next_field(text, at), stat.ppid)) return std::nullopt;     // 4
  if (!parse_number(next_field(text, at), stat.pgid)) return std::nullopt;     // 5
  if (!parse_number(next_field(text, at), stat.session)) return std::nullopt;  // 6
  for (int field = 7; field < 22; ++field) {
    if (next_field(text, at).empty()) return std::nullopt;
  }
  if (!parse_number(next_field(text, at), stat.start_time)) return std::nullopt;  // 22
  return stat;
}

std::vector<pid_t> descendants(const std::vector<ProcStat>& table, const std::vector<pid_t>& roots,
                               pid_t spared) {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  for (const ProcStat& process : table) children[process.ppid].push_back(process.pid);
  return walk_down(roots, spared, [&children](pid_t parent) {
    auto found = children.find(parent);
    return found == children.end() ? std::vector<pid_t>{} : found->second;
  });
}

std::optional<std::vector<pid_t>> read_children(pid_t pid) {
  if (!children_files()) return std::nullopt;
  std::vector<pid_t> children;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* directory = ::opendir(tasks.c_str());
  if (directory == nullptr) return children;  // gone
  while (dirent* entry = ::readdir(directory)) {
    pid_t thread = 0;
    if (parse_number(std::string_view(entry->d_name), thread) && thread > 0) {
      append_numbers(read_whole(tasks + "/" + entry->d_name + "/children"), children);
    }
  }
  ::closedir(directory);
  return children;
}

std::vector<pid_t> children_now(pid_t parent) {
  if (auto children = read_children(parent)) return *children;
  std::vector<pid_t> children;
  for (const ProcStat& process : scan_processes()) {
    if (process.ppid == parent) children.push_back(process.pid);
  }
  return children;
}

std::vector<pid_t> descendants_now(const std::vector<pid_t>& roots, pid_t spared) {
  if (!children_files()) return descendants(scan_processes(), roots, spared);
  return walk_down(roots, spared, [](pid_t parent) {
    return read_children(parent).value_or(std::vector<pid_t>{});
  });
}

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  return parse_proc_stat(read_whole("/proc/" + std::to_string(pid) + "/stat"));  // "": none
}

std::vector<ProcStat> scan_processes() {
  std::vector<ProcStat> table;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return table;
  while (dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    std::string_view name(entry->d_name);
    if (!parse_number(name, pid) || pid <= 0) continue;
    if (auto stat = read_proc_stat(pid)) table.push_back(*stat);
  }
  ::closedir(proc);
  return table;
}

size_t kill_trees(const std::vector<pid_t>& roots, pid_t spared) {
  std::vector<pid_t> stopped;
  for (pid_t root : roots) {
    if (root <= 1 || root == spared) continue;
    ::kill(root, SIGSTOP);  // no fork of its completes after this: the scan below sees them all
    stopped.push_back(root);
  }
  // A process that forked just before it was stopped shows up one look later: look until a look
  // finds nothing new (bounded, against a pathological tree).
  for (int pass = 0; pass < 64 && !stopped.empty(); ++pass) {
    std::vector<pid_t> below = descendants_now(stopped, spared);
    std::set<pid_t> known(stopped.begin(), stopped.end());
    bool grew = false;
    for (pid_t pid : below) {
      if (known.count(pid)) continue;
      ::kill(pid, SIGSTOP);
      stopped.push_back(pid);
      grew = true;
    }
    if (!grew) break;
  }
  for (pid_t pid : stopped) ::kill(pid, SIGKILL);
  return stopped.size();
}

}  // namespace cohort
