// cohortd: the standalone rendezvous daemon (and optionally a plain TCPStore).
#include "launcher/rendezvous_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cohortd: cohort's rendezvous daemon; serves many runs at once"};
  cohort::DaemonCommand command;
  cohort::add_daemon_flags(app, command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  return cohort::run_daemon(command);
}
