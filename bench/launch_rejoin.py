#!/usr/bin/python3
"""A host lost from an elastic `cohort launch` and started again: how soon the run goes on without
it, and how soon it is back in.

Starts 3 real OpenSSH servers on 127.0.0.2 .. 127.0.0.4 (bench/launch_ssh.py's SshHosts), then, run
after run: `cohort launch -H 127.0.0.2:1,127.0.0.3:1,127.0.0.4:1 --nnodes 2:3 <ssh flags>
--no-python WORKER DIR`, where WORKER is a /bin/sh script that writes `date +%s%N` into
DIR/<round>_<world size>_<rank> and sleeps. Once the 3 workers of round 0 run, the agent of
127.0.0.4 is killed (SIGKILL; its sshd stays up, so the launch's ssh to it ends with 255: lost).
Two figures from the kill: to the 2 workers of the smaller round running (the run goes on without
the host), and to the 3 workers of a later round of 3 running (the host started again by the
launch, 1 s after the loss, and taken back in by a scale-up). The floor: one `ssh HOST date +%s%N`
(the launch starts the host again over ssh). The launch is then stopped (SIGTERM).

With --loss ssh, the agent is not killed: the sshd process that serves its connection is stopped
(SIGSTOP), as when a firewall drops the connection or the network is cut long enough for ssh to
give up while the host's agent runs on. The launch's ssh notices within about 2 s
(ServerAliveInterval=1, ServerAliveCountMax=2, given with --ssh-option), starts the host again,
and the new agent stops the earlier one (which leaves the run) before it joins. The figures are
then from the SIGSTOP: to the earlier agent's end, and to all 3 hosts' workers running again.

Usage: bench/launch_rejoin.py [--build build] [--runs 5] [--loss agent|ssh]
Needs /usr/sbin/sshd, /usr/bin/ssh, /usr/bin/ssh-keygen and root, as bench/launch_ssh.py.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_ssh  # noqa: E402  (the sshd servers and process helpers)

HOSTS = launch_ssh.HOSTS[:3]
LOST = HOSTS[2]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise launch_ssh.Failed(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def started(out_dir):
    """{(round, world): [start ns, ...]} from the files the workers wrote."""
    rounds = {}
    for name in os.listdir(out_dir):
        match = re.fullmatch(r"(\d+)_(\d+)_(\d+)", name)
        if not match:
            continue
        with open(os.path.join(out_dir, name)) as f:
            text = f.read().strip()
        if text:
            key = (int(match.group(1)), int(match.group(2)))
            rounds.setdefault(key, []).append(int(text))
    return rounds


def round_running(out_dir, world, after_round):
    """The start ns of the last worker of the first round after `after_round` in which all
    `world` workers run, or None."""
    for (round_, size), times in sorted(started(out_dir).items()):
        if round_ > after_round and size == world and len(times) == world:
            return max(times)
    return None


def lost_agent(cohort):
    """The pid of 127.0.0.4's agent: of the two processes whose command line is this cohort's run
    on it (the agent and the keeper it forked), the one whose parent is not the other."""
    found = subprocess.run(["pgrep", "-f", f"^{re.escape(cohort)} run .*--local-addr {LOST} "],
                           stdout=subprocess.PIPE, text=True, timeout=10).stdout.split()
    pids = {int(pid) for pid in found}
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        if int(stat[stat.rindex(")") + 2:].split()[1]) not in pids:
            return pid
    raise launch_ssh.Failed(f"no agent of {LOST} among {sorted(pids)}")


def no_agents_left(cohort):
    """True once no remote `cohort run` of an earlier run is alive (each ends on its own once the
    launch that started it has stopped it)."""
    pattern = f"^{re.escape(cohort)} run --under-launch"
    return subprocess.run(["pgrep", "-f", pattern], stdout=subprocess.PIPE,
                          timeout=10).returncode != 0


def ended(pid):
    """True once `pid` is gone or a zombie (its stopped parent has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def lose_ssh(victim, timeout):
    """Stops the sshd process that serves `victim`'s connection; returns the time of the stop, the
    time the victim ended, and the stopped process (to be continued afterwards)."""
    session = parent_of(victim)
    stopped_ns = time.time_ns()
    os.kill(session, signal.SIGSTOP)
    try:
        wait_for(lambda: ended(victim), timeout, "the earlier agent to be stopped by the new one")
    except launch_ssh.Failed:
        os.kill(session, signal.SIGCONT)
        raise
    return stopped_ns, time.time_ns(), session


def one_run(cohort_argv, out_dir, work, timeout, loss):
    wait_for(lambda: no_agents_left(cohort_argv[0]), timeout, "the last run's agents to end")
    launch_ssh.fresh(out_dir)
    log_path = os.path.join(work, "launch.log")
    with open(log_path, "w") as log:
        launch = subprocess.Popen(cohort_argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  cwd=work, start_new_session=True)
    launch_ssh.ACTIVE.append(launch)
    killed = "nothing yet"
    try:
        wait_for(lambda: len(started(out_dir).get((0, 3), [])) == 3, timeout, "round 0")
        victim = lost_agent(cohort_argv[0])
        with open(f"/proc/{victim}/cmdline", "rb") as f:
            killed = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        if loss == "ssh":
            killed_ns, ended_ns, session = lose_ssh(victim, timeout)
            os.kill(session, signal.SIGCONT)  # it finds its connection gone and ends
            shrunk = ended_ns  # the earlier agent gone: reported in place of the smaller round
        else:
            killed_ns = time.time_ns()
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: round_running(out_dir, 2, 0) is not None, timeout, "a round of 2")
            shrunk = round_running(out_dir, 2, 0)
        wait_for(lambda: round_running(out_dir, 3, 0) is not None, timeout, "a round of 3 again")
        back = round_running(out_dir, 3, 0)
    except launch_ssh.Failed as error:
        with open(log_path) as f:
            raise launch_ssh.Failed(f"{error}\n{f.read()}\n(killed: {killed})")
    finally:
        launch_ssh.kill_group(launch, grace=10)
        launch_ssh.ACTIVE.remove(launch)
    return (shrunk - killed_ns) / 1e6, (back - killed_ns) / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(launch_ssh.ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=60, help="seconds per wait")
    parser.add_argument("--loss", choices=["agent", "ssh"], default="agent",
                        help="kill the host's agent, or stop its ssh connection's sshd")
    args = parser.parse_args()
    cohort = os.path.abspath(os.path.join(args.build, "bin", "cohort"))
    for path in (cohort, "/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"):
        if not os.access(path, os.X_OK):
            sys.exit(f"missing {path}")
    launch_ssh.HOSTS[:] = HOSTS  # SshHosts starts one sshd per address of this list

    def interrupted(*_):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, interrupted)
    base = tempfile.mkdtemp(prefix="cohort_bench_rejoin_")
    hosts = None
    floor, shrunk, back = [], [], []
    try:
        hosts = launch_ssh.SshHosts(base)
        work = os.path.join(base, "work")
        out_dir = os.path.join(base, "started")
        os.makedirs(work)
        worker = os.path.join(base, "worker.sh")
        with open(worker, "w") as f:
            f.write('#!/bin/sh\n'
                    'date +%s%N > "$1/${TORCHELASTIC_RESTART_COUNT}_${WORLD_SIZE}_${RANK}"\n'
                    'exec sleep 120\n')
        os.chmod(worker, 0o755)
        cohort_argv = ([cohort, "launch", "-H", ",".join(f"{h}:1" for h in HOSTS),
                        "--nnodes", "2:3", "--max-restarts", "3"] + hosts.cohort_flags() +
                       (["--ssh-option", "ServerAliveInterval=1", "--ssh-option",
                         "ServerAliveCountMax=2"] if args.loss == "ssh" else []) +
                       ["--no-python", worker, out_dir])
        for i in range(args.runs):
            start_ns = time.time_ns()
            out = launch_ssh.run_checked(hosts.ssh_argv(LOST, "date +%s%N"), args.timeout)
            floor.append((int(out.strip().splitlines()[-1]) - start_ns) / 1e6)
            to_smaller, to_back = one_run(cohort_argv, out_dir, work, args.timeout, args.loss)
            shrunk.append(to_smaller)
            back.append(to_back)
            first = "earlier agent ended" if args.loss == "ssh" else "without the host"
            print(f"run {i + 1}/{args.runs}: ssh {floor[-1]:.0f} ms, {first} "
                  f"{to_smaller:.0f} ms, back {to_back:.0f} ms", file=sys.stderr, flush=True)
    except launch_ssh.Failed as error:
        sys.exit(f"launch_rejoin: {error}")
    except KeyboardInterrupt:
        print("launch_rejoin: interrupted; stopping everything it started", file=sys.stderr)
        sys.exit(130)
    finally:
        launch_ssh.clean_up(hosts, base)

    if args.loss == "ssh":
        print("| from the stop of the sshd serving a host's connection (median) | ms |")
        print("|---|---|")
        print(f"| the host's earlier agent ended (stopped by the agent started again) | "
              f"{statistics.median(shrunk):.0f} |")
    else:
        print("| from the kill of a host's agent (median) | ms |")
        print("|---|---|")
        print(f"| the 2 other hosts' workers running again (the run goes on without it) | "
              f"{statistics.median(shrunk):.0f} |")
    print(f"| all 3 hosts' workers running again (started again 1 s after the loss) | "
          f"{statistics.median(back):.0f} |")
    print(f"| floor: one `ssh HOST date` | {statistics.median(floor):.0f} |")
    print()
    print(f"runs: {args.runs}; machine: {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end.")


if __name__ == "__main__":
    main()
