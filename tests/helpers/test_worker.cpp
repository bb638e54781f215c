// test_worker: a scriptable stand-in for a training script, used by the integration tests.
// Every action is a flag; actions run in this order: signal handling (first, so that a test that
// signals a worker once its pid or env file is there finds its handlers in place), record pid,
// dump env, print lines, spawn grandchild, spawn daemon, write ready file, fail-first-n-runs,
// sleep/hang, exit/crash. The grandchild and the daemon take signals as a fresh process does.
// --hang holds every worker except the one that is about to fail (so one rank can fail while
// the others stay busy).
// "Only on rank R" restricts the failure flags to the worker whose RANK is R. "{NAME}" in a
// file path is replaced by the value of environment variable NAME, e.g. env_{RANK}.json.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace {

volatile sig_atomic_t g_last_signal = 0;
std::string g_signal_log;
int g_exit_on_signal = -1;

void usage() {
  std::fputs(
      "test_worker [--pid-file P] [--dump-env P] [--print TEXT] [--stderr TEXT] [--lines N]\n"
      "            [--spawn-grandchild PIDFILE] [--spawn-daemon PIDFILE] [--ready-file P]\n"
      "            [--ignore-sigterm]\n"
      "            [--record-signals P] [--exit-on-signal CODE] [--fail-first-n-runs N STATE]\n"
      "            [--only-rank R] [--write-error-file MSG] [--sleep-ms N] [--hang]\n"
      "            [--exit-code N] [--crash-signal SIG]\n",
      stderr);
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char code[8];
          std::snprintf(code, sizeof code, "\\u%04x", c);
          out += code;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// "{NAME}" in a path becomes the value of environment variable NAME ("{RANK}", ...).
std::string expand(std::string text) {
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open)) {
    size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    const char* value = std::getenv(text.substr(open + 1, close - open - 1).c_str());
    std::string replacement = value ? value : "";
    text.replace(open, close - open + 1, replacement);
    open += replacement.size();
  }
  return text;
}

void write_file(const std::string& raw_path, const std::string& text) {
  std::string path = expand(raw_path);
  std::string temporary = path + ".tmp";
  std::ofstream(temporary) << text;
  std::rename(temporary.c_str(), path.c_str());
}

void dump_env(const std::string& path) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t equals = text.find('=');
    if (equals != std::string::npos) env[text.substr(0, equals)] = text.substr(equals + 1);
  }
  std::string json = "{";
  for (const auto& [name, value] : env) {
    if (json.size() > 1) json += ",";
    json += "\"" + json_escape(name) + "\":\"" + json_escape(value) + "\"";
  }
  json += ",\"__pid\":\"" + std::to_string(::getpid()) + "\"";
  char stdin_target[256] = {};
  ssize_t length = ::readlink("/proc/self/fd/0", stdin_target, sizeof stdin_target - 1);
  if (length < 0) length = 0;
  json += ",\"__stdin\":\"" + json_escape(std::string(stdin_target, length)) + "\"}";
  write_file(path, json);
}

void on_signal(int signal) {
  g_last_signal = signal;
  if (!g_signal_log.empty()) {
    int fd = ::open(g_signal_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      char line[32];
      int length = std::snprintf(line, sizeof line, "%d\n", signal);
      ssize_t ignored = ::write(fd, line, static_cast<size_t>(length));
      (void)ignored;
      ::close(fd);
    }
  }
  if (g_exit_on_signal >= 0) ::_exit(g_exit_on_signal);
}

constexpr int kHandledSignals[] = {SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGQUIT, SIGTERM};

// --record-signals and --exit-on-signal handle kHandledSignals; --ignore-sigterm ignores SIGTERM.
void install_signal_handling(bool ignore_sigterm) {
  struct sigaction action {};
  action.sa_handler = on_signal;
  for (int signal : kHandledSignals) {
    if (!g_signal_log.empty() || g_exit_on_signal >= 0) ::sigaction(signal, &action, nullptr);
  }
  if (ignore_sigterm) ::signal(SIGTERM, SIG_IGN);
}

void default_signal_handling() {
  for (int signal : kHandledSignals) ::signal(signal, SIG_DFL);
}

void spawn_grandchild(const std::string& pid_file) {
  pid_t pid = ::fork();
  if (pid == 0) {
    default_signal_handling();
    for (;;) ::pause();
  }
  write_file(pid_file, std::to_string(pid));
}

// A daemon the classic way: fork, setsid (a new session and process group), fork again, and the
// middle process exits, so the daemon is nobody's child but a subreaper's (or init's). It keeps
// stdout and stderr open and pauses forever; its pid is in `pid_file` when this returns.
void spawn_daemon(const std::string& pid_file) {
  int ready[2];
  if (::pipe(ready) != 0) std::exit(70);
  pid_t middle = ::fork();
  if (middle == 0) {
    ::setsid();
    default_signal_handling();
    if (::fork() == 0) {
      write_file(pid_file, std::to_string(::getpid()));
      ::close(ready[1]);
      for (;;) ::pause();
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte;
  while (::read(ready[0], &byte, 1) > 0) {  // end of file once the daemon wrote its pid
  }
  ::close(ready[0]);
  ::waitpid(middle, nullptr, 0);
}

int runs_so_far(const std::string& state_file) {
  std::ifstream in(expand(state_file));
  int runs = 0;
  in >> runs;
  write_file(state_file, std::to_string(runs + 1));
  return runs;
}

void write_error_file(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  std::string json = "{\"message\": {\"message\": \"" + json_escape(message) +
                     "\", \"extraInfo\": {\"py_callstack\": \"Traceback (most recent call last):\\n"
                     "  File \\\"train.py\\\", line 1\\n" +
                     json_escape(message) + "\", \"timestamp\": \"" +
                     std::to_string(::time(nullptr)) + "\"}}}";
  write_file(path, json);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto value = [&](size_t& i) -> std::string {
    if (i + 1 >= args.size()) {
      usage();
      std::exit(64);
    }
    return args[++i];
  };
  int exit_code = 0, crash_signal = 0, sleep_ms = 0, only_rank = -1, fail_runs = 0, lines = 0;
  bool hang = false, ignore_sigterm = false;
  std::string pid_file, env_file, ready_file, grandchild_file, daemon_file, state_file;
  std::string error_message;
  std::vector<std::string> prints, stderr_prints;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--exit-code")
      exit_code = std::atoi(value(i).c_str());
    else if (flag == "--crash-signal")
      crash_signal = std::atoi(value(i).c_str());
    else if (flag == "--sleep-ms")
      sleep_ms = std::atoi(value(i).c_str());
    else if (flag == "--hang")
      hang = true;
    else if (flag == "--ignore-sigterm")
      ignore_sigterm = true;
    else if (flag == "--pid-file")
      pid_file = value(i);
    else if (flag == "--dump-env")
      env_file = value(i);
    else if (flag == "--ready-file")
      ready_file = value(i);
    else if (flag == "--print")
      prints.push_back(value(i));
    else if (flag == "--stderr")
      stderr_prints.push_back(value(i));
    else if (flag == "--lines")
      lines = std::atoi(value(i).c_str());
    else if (flag == "--spawn-grandchild")
      grandchild_file = value(i);
    else if (flag == "--spawn-daemon")
      daemon_file = value(i);
    else if (flag == "--record-signals")
      g_signal_log = expand(value(i));
    else if (flag == "--exit-on-signal")
      g_exit_on_signal = std::atoi(value(i).c_str());
    else if (flag == "--only-rank")
      only_rank = std::atoi(value(i).c_str());
    else if (flag == "--write-error-file")
      error_message = value(i);
    else if (flag == "--fail-first-n-runs") {
      fail_runs = std::atoi(value(i).c_str());
      state_file = value(i);
    } else {
      usage();
      return 64;
    }
  }
  const char* rank_text = std::getenv("RANK");
  bool failing_rank = only_rank < 0 || (rank_text != nullptr && std::atoi(rank_text) == only_rank);

  install_signal_handling(ignore_sigterm);
  if (!pid_file.empty()) write_file(pid_file, std::to_string(::getpid()));
  if (!env_file.empty()) dump_env(env_file);
  for (const auto& text : prints) std::printf("%s\n", text.c_str());
  for (int n = 0; n < lines; ++n)
    std::printf("line %d of rank %s\n", n, rank_text ? rank_text : "?");
  std::fflush(stdout);
  for (const auto& text : stderr_prints) std::fprintf(stderr, "%s\n", text.c_str());
  if (!grandchild_file.empty()) spawn_grandchild(grandchild_file);
  if (!daemon_file.empty()) spawn_daemon(daemon_file);

  if (!ready_file.empty()) write_file(ready_file, std::to_string(::getpid()));

  if (fail_runs > 0 && failing_rank && runs_so_far(state_file) >= fail_runs) {
    exit_code = 0;
    crash_signal = 0;
  }
  if (sleep_ms > 0) ::usleep(static_cast<useconds_t>(sleep_ms) * 1000);
  bool will_fail = failing_rank && (exit_code != 0 || crash_signal != 0 || !error_message.empty());
  while (hang && !will_fail) ::pause();  // --hang: everyone but the rank that is to fail
  if (!failing_rank) return 0;
  if (!error_message.empty()) write_error_file(error_message);
  if (crash_signal > 0) {
    ::signal(crash_signal, SIG_DFL);
    ::raise(crash_signal);
  }
  return exit_code;
}
