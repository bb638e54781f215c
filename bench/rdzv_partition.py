#!/usr/bin/python3
"""One node cut off from the others, then the network heals: cohort beside torchrun.

Three agents, no separate daemon, --nnodes 2:3, 2 workers each that hang (test_worker --hang,
writing a pid file per round and rank): the first agent hosts the rendezvous (cohort, at
--rdzv-endpoint) or the c10d store (torchrun 1.13, tests/integration/torchrun_debian12.py,
--monitor_interval 0.1, --max_restarts 3). One node runs in a network namespace of its own
(10.233.N.2), linked to this host (10.233.N.1) by a veth pair, which the bench makes and removes
(root and iproute2's `ip` needed); the others run on this host. --cut node (the default): the
rendezvous's host on 10.233.N.1, one beside it (127.0.0.2), the third node cut off;
--rdzv-fallback names the cut-off node, which hosts a daemon there when it moves. --cut host:
the rendezvous's host is the one in the namespace, the two others (127.0.0.2, .3) beside the
fallback, 10.233.N.1, which one of them hosts when they move. Once round 0 runs, the namespace's
link goes down (a failed switch port); --partition seconds later (for cohort, plus a random
fraction of a second) it comes back up. Measured, with the default timeouts:
  the rest goes on  from the cut until the two other agents' round-1 workers run (4 ranks)
  back in the run   from the heal until a round of all three nodes runs (6 ranks)
torchrun's agents do not notice a lost peer while their own workers hang (real workers would
wait in a collective until the NCCL timeout): each of its runs says what happened within
--torchrun-wait seconds of the cut (the first agent hosts the c10d store: rdzv_conf is_host,
since 1.13 has no --local_addr), and whether, and when, a round of 6 ranks ran within 20 s of
the heal. Medians of --runs (torchrun: --torchrun-runs). Prints a
Markdown table for docs/BENCHMARKS.md. Every process it starts is killed, and the namespace
removed, at the end.

Usage: bench/rdzv_partition.py [--build build] [--cut node|host] [--runs 5] [--partition 10]
           [--torchrun-runs 2] [--torchrun-wait 40] [--skip-torchrun]
"""
import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from rendezvous_bench import TORCHRUNS, Processes, free_port, monotonic, wait_all, wait_files
from rdzv_failover import fail, wait_listening


class CutOffNode:
    """A network namespace at 10.233.N.2 linked to this host (10.233.N.1) by a veth pair."""

    def __init__(self):
        n = 1 + os.getpid() % 250
        self.ns, self.host_if, self.ns_if = (f"cohort_bench_{os.getpid()}", f"cbh{os.getpid()}",
                                             f"cbn{os.getpid()}")
        self.host_ip, self.ns_ip = f"10.233.{n}.1", f"10.233.{n}.2"
        for command in (f"ip netns add {self.ns}",
                        f"ip link add {self.host_if} type veth peer name {self.ns_if}",
                        f"ip link set {self.ns_if} netns {self.ns}",
                        f"ip addr add {self.host_ip}/24 dev {self.host_if}",
                        f"ip link set {self.host_if} up",
                        f"ip netns exec {self.ns} ip addr add {self.ns_ip}/24 dev {self.ns_if}",
                        f"ip netns exec {self.ns} ip link set {self.ns_if} up",
                        f"ip netns exec {self.ns} ip link set lo up"):
            subprocess.run(command.split(), check=True)

    def set_link(self, up):
        subprocess.run(["ip", "netns", "exec", self.ns, "ip", "link", "set", self.ns_if,
                        "up" if up else "down"], check=True)

    def inside(self, argv):
        return ["ip", "netns", "exec", self.ns] + argv

    def remove(self):
        subprocess.run(["ip", "netns", "del", self.ns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", self.host_if], stderr=subprocess.DEVNULL)


def hanging_worker(args, pid_dir):
    """test_worker that writes pid_<round>_<rank> in pid_dir and hangs."""
    return [os.path.join(args.build, "bin", "test_worker"), "--hang", "--pid-file",
            os.path.join(pid_dir, "pid_{TORCHELASTIC_RESTART_COUNT}_{RANK}")]


def pid_names(round_, ranks):
    return [f"pid_{round_}_{rank}" for rank in range(ranks)]


def first_ip(args, node):
    """Where the rendezvous's host runs: cut off with --cut host."""
    return node.ns_ip if args.cut == "host" else node.host_ip


def start_three(args, procs, node, agent_argv, endpoint, what):
    """The host agent (waits until it listens), then the two others; returns them with the
    cut-off one last."""
    host = first_ip(args, node)
    argv = agent_argv(host)
    agents = [procs.start(node.inside(argv) if args.cut == "host" else argv, f"{what}_host")]
    if not wait_listening(endpoint, monotonic() + 30):
        fail(procs, f"{what}: the first agent does not host the rendezvous", agents[0])
    agents.append(procs.start(agent_argv("127.0.0.2"), f"{what}_beside"))
    if args.cut == "host":
        agents.append(procs.start(agent_argv("127.0.0.3"), f"{what}_beside2"))
        return agents[1:] + agents[:1]
    agents.append(procs.start(node.inside(agent_argv(node.ns_ip)), f"{what}_cut_off"))
    return agents


def cohort_once(args, procs, scratch, node, rep):
    pid_dir = tempfile.mkdtemp(prefix=f"cohort_{rep}_", dir=scratch)
    endpoint = f"{first_ip(args, node)}:{free_port()}"
    fallback = f"{node.ns_ip if args.cut == 'node' else node.host_ip}:{free_port()}"

    def agent_argv(address):
        return [os.path.join(args.build, "bin", "cohort"), "run", "--nnodes", "2:3",
                "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                "--rdzv-fallback", fallback, "--rdzv-id", f"partition{rep}", "--insecure",
                "--local-addr", address, "--no-python"] + hanging_worker(args, pid_dir)

    agents = start_three(args, procs, node, agent_argv, endpoint, "cohort")
    if wait_files(pid_dir, pid_names(0, 6), monotonic() + 30) is None:
        fail(procs, "cohort: round 0 did not start", agents[0])
    cut_at = monotonic()
    node.set_link(False)
    rest = wait_files(pid_dir, pid_names(1, 4), cut_at + 60, interval=0.002)
    if rest is None:
        fail(procs, "cohort: the two others did not go on", agents[0])
    # A random fraction of a second more: the heal falls anywhere in the cut-off agent's cycle of
    # asking the other endpoint (once a keep_alive_interval, 1 s), not always at the same point.
    healed_at = cut_at + args.partition + random.uniform(0, 1)
    time.sleep(max(0.0, healed_at - monotonic()))  # the partition lasts its time
    node.set_link(True)
    back = wait_files(pid_dir, pid_names(2, 6), healed_at + 60, interval=0.002)
    if back is None:
        fail(procs, "cohort: the cut-off node did not come back", agents[2])
    for agent in agents:
        agent.send_signal(signal.SIGTERM)
    wait_all(agents, monotonic() + 30)
    procs.finished(agents)
    return (rest - cut_at) * 1000, (back - healed_at) * 1000


def torchrun_once(args, procs, scratch, node, rep):
    pid_dir = tempfile.mkdtemp(prefix=f"torchrun_{rep}_", dir=scratch)
    endpoint = f"{first_ip(args, node)}:{free_port()}"

    def agent_argv(address):  # 1.13 has no --local_addr; the first agent hosts the store
        return TORCHRUNS["torchrun"] + [
            "--rdzv_conf", f"is_host={address == first_ip(args, node)}",
            "--nnodes", "2:3", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", endpoint, "--rdzv_id", f"partition{rep}", "--max_restarts", "3",
            "--monitor_interval", "0.1", "--no_python"] + hanging_worker(args, pid_dir)

    agents = start_three(args, procs, node, agent_argv, endpoint, "torchrun")
    if wait_files(pid_dir, pid_names(0, 6), monotonic() + 90) is None:
        fail(procs, "torchrun: round 0 did not start", agents[0])
    cut_at = monotonic()
    node.set_link(False)
    rest = wait_files(pid_dir, pid_names(1, 4), cut_at + args.torchrun_wait, interval=0.01)
    cut_off_end = wait_all([agents[2]], cut_at + args.torchrun_wait)
    node.set_link(True)
    healed_at = monotonic()
    back = round_of_six(pid_dir, healed_at + 20)
    outcome = {"rest": None if rest is None else (rest - cut_at) * 1000,
               "cut_off_exit": agents[2].poll(),
               "cut_off_ended": None if cut_off_end is None else (cut_off_end - cut_at) * 1000,
               "back": None if back is None else (back - healed_at) * 1000}
    procs.finished(agents)
    return outcome


def round_of_six(pid_dir, deadline):
    """When the workers of some round after the first, 6 ranks, had all run; None by the deadline."""
    while monotonic() < deadline:
        names = set(os.listdir(pid_dir))
        if any(set(pid_names(r, 6)) <= names for r in range(1, 5)):
            return monotonic()
        time.sleep(0.01)
    return None


def print_table(args, cohort, torchrun):
    cut = "the rendezvous's host" if args.cut == "host" else "a node"
    print(f"| what ({cut} cut off for {args.partition:g} s) | median | runs (ms) |")
    print("|---|---|---|")
    for label, index in (("the two others' round-1 workers run, after the cut", 0),
                         ("all three nodes' round-2 workers run, after the heal", 1)):
        samples = [run[index] for run in cohort]
        runs = ", ".join(f"{s:.0f}" for s in samples)
        print(f"| cohort --rdzv-fallback: {label} | **{statistics.median(samples):,.0f} ms** | "
              f"{runs} |")
    for outcome in torchrun:
        rest = ("the two others' workers never restarted" if outcome["rest"] is None
                else f"the two others restarted after {outcome['rest']:,.0f} ms")
        ended = ("the cut-off agent still ran" if outcome["cut_off_ended"] is None
                 else f"the cut-off agent exited {outcome['cut_off_exit']} after "
                      f"{outcome['cut_off_ended']:,.0f} ms")
        back = ("no round of 6 ranks" if outcome["back"] is None
                else f"a round of 6 ranks after {outcome['back']:,.0f} ms")
        print(f"| torchrun 1.13, within {args.torchrun_wait:g} s of the cut: {rest}; {ended}; "
              f"after the heal: {back} | - | - |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))), "build"))
    parser.add_argument("--cut", choices=("node", "host"), default="node",
                        help="cut off a node (default) or the rendezvous's host")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--partition", type=float, default=10)
    parser.add_argument("--torchrun-runs", type=int, default=2)
    parser.add_argument("--torchrun-wait", type=float, default=40)
    parser.add_argument("--skip-torchrun", action="store_true")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    if os.geteuid() != 0:
        sys.exit("bench/rdzv_partition.py: needs root, for a network namespace")
    scratch = tempfile.mkdtemp(prefix="cohort_partition_bench_")
    procs = Processes(scratch)
    node = CutOffNode()
    try:
        cohort = []
        for rep in range(args.runs):
            cohort.append(cohort_once(args, procs, scratch, node, rep))
            print(f"  cohort run {rep}: {cohort[-1][0]:.0f} ms, {cohort[-1][1]:.0f} ms",
                  file=sys.stderr)
        torchrun = []
        if not args.skip_torchrun:
            for rep in range(args.torchrun_runs):
                torchrun.append(torchrun_once(args, procs, scratch, node, rep))
                print(f"  torchrun run {rep}: {torchrun[-1]}", file=sys.stderr)
    finally:
        procs.kill_all()
        node.remove()
        shutil.rmtree(scratch, ignore_errors=True)
    print_table(args, cohort, torchrun)


if __name__ == "__main__":
    main()
