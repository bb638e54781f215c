#include "launcher/launch/ssh_command.hpp"

#include <algorithm>
#include <cctype>

namespace cohort {

namespace {

// The options every ssh of a launch shares: port, the user's -o options, the control path.
void add_common_options(const SshSettings& ssh, std::vector<std::string>& argv) {
  if (ssh.port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(ssh.port));
  }
  for (const std::string& option : ssh.options) {
    argv.push_back("-o");
    argv.push_back(option);
  }
  if (!ssh.control_path.empty()) {
    argv.push_back("-o");
    argv.push_back("ControlPath=" + ssh.control_path);
  }
}

}  // namespace

std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& host,
                                  const std::string& remote_line, SshRole role) {
  // ssh takes the first value it is given for an option: the user's -o options come first, so
  // that e.g. --ssh-option ServerAliveInterval=1 wins over the launch's default.
  std::vector<std::string> argv = {ssh.program, "-T"};
  add_common_options(ssh, argv);
  const std::vector<std::string> defaults{
      "BatchMode=yes", "ConnectTimeout=" + std::to_string(ssh.connect_timeout_seconds),
      "ServerAliveInterval=5", "ServerAliveCountMax=3"};
  for (const std::string& option : defaults) {
    argv.push_back("-o");
    argv.push_back(option);
  }
  if (!ssh.control_path.empty()) {
    argv.push_back("-o");
    argv.push_back(role == SshRole::Master ? "ControlMaster=auto" : "ControlMaster=no");
    if (role == SshRole::Master) {
      argv.push_back("-o");
      argv.push_back("ControlPersist=30");  // ends 30 s after its last session, should we die
    }
  }
  argv.push_back(host);
  argv.push_back(remote_line);
  return argv;
}

std::vector<std::string> ssh_close_master_argv(const SshSettings& ssh, const std::string& host) {
  std::vector<std::string> argv = {ssh.program, "-O", "exit"};
  add_common_options(ssh, argv);
  argv.push_back(host);
  return argv;
}

bool user_controls_sharing(const std::vector<std::string>& options) {
  for (const std::string& option : options) {
    std::string key = option.substr(0, option.find_first_of("= "));
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (key == "controlmaster" || key == "controlpath" || key == "controlpersist") return true;
  }
  return false;
}

std::string shell_quote(std::string_view text) {
  bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == ':' ||
           c == ',' || c == '=' || c == '+' || c == '@';
  });
  if (safe) return std::string(text);
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

std::string remote_shell_line(const RemoteCommand& command) {
  std::string line;
  if (!command.working_dir.empty())
    line = "cd -- " + shell_quote(command.working_dir) + " || exit 2; ";
  line += "exec env";
  for (const auto& [name, value] : command.env) line += " " + shell_quote(name + "=" + value);
  // env takes any word with '=' for a setting, quoted or not: such a program (a path with '=' in
  // it) is started through sh instead, whatever the login shell.
  if (!command.argv.empty() && command.argv[0].find('=') != std::string::npos)
    line += " /bin/sh -c 'exec \"$0\" \"$@\"'";
  for (const std::string& word : command.argv) line += " " + shell_quote(word);
  return line;
}

}  // namespace cohort
