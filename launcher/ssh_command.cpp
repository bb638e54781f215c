#include "launcher/ssh_command.hpp"

#include <algorithm>
#include <cctype>

namespace cohort {

std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& host,
                                  const std::string& remote_line) {
  std::vector<std::string> argv = {
      ssh.program, "-T",
      "-o",        "BatchMode=yes",
      "-o",        "ConnectTimeout=" + std::to_string(ssh.connect_timeout_seconds),
      "-o",        "ServerAliveInterval=5",
      "-o",        "ServerAliveCountMax=3"};
  if (ssh.port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(ssh.port));
  }
  for (const std::string& option : ssh.options) {
    argv.push_back("-o");
    argv.push_back(option);
  }
  argv.push_back(host);
  argv.push_back(remote_line);
  return argv;
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
  for (const std::string& word : command.argv) line += " " + shell_quote(word);
  return line;
}

}  // namespace cohort
