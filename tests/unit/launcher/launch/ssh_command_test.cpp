#include "launcher/launch/ssh_command.hpp"

#include <catch2/catch.hpp>

using namespace cohort;

TEST_CASE("shell_quote: bare when safe, single quotes otherwise", "[unit][ssh_command]") {
  CHECK(shell_quote("/usr/bin/cohort") == "/usr/bin/cohort");
  CHECK(shell_quote("A=1,2:3") == "A=1,2:3");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("$HOME;rm -rf /") == "'$HOME;rm -rf /'");
  CHECK(shell_quote("[h:${rank}]:") == "'[h:${rank}]:'");
}

TEST_CASE(
    "ssh argv: port and the user's -o options first (ssh keeps an option's first value), "
    "then batch mode and timeouts, before the host",
    "[unit][ssh_command]") {
  SshSettings ssh;
  ssh.port = 2222;
  ssh.connect_timeout_seconds = 7;
  ssh.options = {"IdentityFile=/k", "ServerAliveInterval=1"};
  CHECK(ssh_argv(ssh, "node1", "true") ==
        std::vector<std::string>{"ssh", "-T", "-p", "2222", "-o", "IdentityFile=/k", "-o",
                                 "ServerAliveInterval=1", "-o", "BatchMode=yes", "-o",
                                 "ConnectTimeout=7", "-o", "ServerAliveInterval=5", "-o",
                                 "ServerAliveCountMax=3", "node1", "true"});
  SshSettings plain;
  CHECK(ssh_argv(plain, "n", "x").size() == 12);
  SshSettings shared;
  shared.control_path = "/tmp/c/%C";
  auto master = ssh_argv(shared, "n", "x", SshRole::Master);
  CHECK(std::vector<std::string>(master.begin(), master.begin() + 4) ==
        std::vector<std::string>{"ssh", "-T", "-o", "ControlPath=/tmp/c/%C"});
  CHECK(std::vector<std::string>(master.begin() + 12, master.end()) ==
        std::vector<std::string>{"-o", "ControlMaster=auto", "-o", "ControlPersist=30", "n", "x"});
  auto client = ssh_argv(shared, "n", "x");
  CHECK(std::vector<std::string>(client.begin() + 12, client.end()) ==
        std::vector<std::string>{"-o", "ControlMaster=no", "n", "x"});
  CHECK(ssh_close_master_argv(shared, "n") ==
        std::vector<std::string>{"ssh", "-O", "exit", "-o", "ControlPath=/tmp/c/%C", "n"});
  CHECK(user_controls_sharing({"User=a", "controlmaster no"}));
  CHECK_FALSE(user_controls_sharing({"User=a", "IdentityFile=/k"}));
}

TEST_CASE("remote line: cd, then exec env with every word quoted", "[unit][ssh_command]") {
  RemoteCommand command{"/home/a b", {{"X", "1"}, {"Y", "it's"}}, {"/opt/cohort", "run", "t.py"}};
  CHECK(remote_shell_line(command) ==
        "cd -- '/home/a b' || exit 2; exec env X=1 'Y=it'\\''s' /opt/cohort run t.py");
  CHECK(remote_shell_line({"", {}, {"cohort", "--version"}}) == "exec env cohort --version");
  // env would take a program path with '=' for a setting.
  CHECK(remote_shell_line({"", {{"A", "1"}}, {"/opt/a=b/cohort", "run"}}) ==
        "exec env A=1 /bin/sh -c 'exec \"$0\" \"$@\"' /opt/a=b/cohort run");
}
