#!/usr/bin/python3
"""The node that hosts the rendezvous is lost: cohort with --rdzv-fallback beside torchrun.

Three agents on this machine, no separate daemon: the first one started hosts the rendezvous at
--rdzv-endpoint (cohort) or the c10d store (torchrun 1.13, tests/integration/torchrun_debian12.py,
--monitor_interval 0.1), --nnodes 2:3, 2 workers each that hang (cohort: test_worker --hang,
writing a pid file per round and rank; torchrun: the same binary, --no_python). Once round 0
runs, that first agent is SIGKILLed, as a node that crashed (its port then refuses), or for
cohort also SIGSTOPped, as a node that went silent (powered off or cut off: no FIN, no RST).
Measured from the signal:
  cohort    until both survivors' round-1 workers wrote their pid files (4 ranks): the others
            moved to --rdzv-fallback and go on; with the default timeouts (heartbeat_timeout 5 s,
            last_call_timeout 2 s) and with short ones (1 s, 0.5 s).
  torchrun  until both surviving agents exited, with their exit codes: the job ends.
Medians of --runs (torchrun: --torchrun-runs). Prints a Markdown table for docs/BENCHMARKS.md.
Every process it starts is killed at the end.

Usage: bench/rdzv_failover.py [--build build] [--runs 7] [--torchrun-runs 3] [--skip-torchrun]
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time

from rendezvous_bench import (TORCHRUNS, Processes, free_port, monotonic, tail, wait_all,
                              wait_files)

SHORT = "heartbeat_timeout=1,keep_alive_interval=0.2,last_call_timeout=0.5"
CASES = {"crashed host, defaults": (None, signal.SIGKILL),
         "crashed host, short timeouts": (SHORT, signal.SIGKILL),
         "silent host, defaults": (None, signal.SIGSTOP)}


def cohort_once(args, procs, scratch, rep, conf, lost_by):
    pid_dir = tempfile.mkdtemp(prefix=f"cohort_{rep}_", dir=scratch)
    endpoint, fallback = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    worker = [os.path.join(args.build, "bin", "test_worker"), "--hang", "--pid-file",
              os.path.join(pid_dir, "pid_{TORCHELASTIC_RESTART_COUNT}_{RANK}")]
    agents = []
    for i in range(3):
        argv = [os.path.join(args.build, "bin", "cohort"), "run", "--nnodes", "2:3",
                "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                "--rdzv-fallback", fallback, "--rdzv-id", f"failover{rep}", "--local-addr",
                f"127.0.0.{2 + i}", "--no-python"]
        if conf:
            argv[-1:-1] = ["--rdzv-conf", conf]
        agents.append(procs.start(argv + worker, "cohort_agent"))
        if i == 0 and not wait_listening(endpoint, monotonic() + 10):  # it hosts the rendezvous
            fail(procs, "cohort: the first agent does not host the rendezvous", agents[0])
    if wait_files(pid_dir, [f"pid_0_{r}" for r in range(6)], monotonic() + 30) is None:
        fail(procs, "cohort: round 0 did not start", agents[0])
    killed_at = monotonic()
    agents[0].send_signal(lost_by)
    up = wait_files(pid_dir, [f"pid_1_{r}" for r in range(4)], killed_at + 60, interval=0.002)
    if up is None:
        fail(procs, "cohort: round 1 did not start", agents[1])
    agents[0].send_signal(signal.SIGKILL)  # a silent one too
    for agent in agents[1:]:
        agent.send_signal(signal.SIGTERM)
    wait_all(agents, monotonic() + 30)
    procs.finished(agents)
    return (up - killed_at) * 1000


def torchrun_once(args, procs, scratch, rep):
    pid_dir = os.path.join(scratch, f"torchrun_{rep}")
    os.makedirs(pid_dir)
    endpoint = f"127.0.0.1:{free_port()}"
    worker = [os.path.join(args.build, "bin", "test_worker"), "--hang", "--pid-file",
              os.path.join(pid_dir, "pid_{RANK}")]
    agents = []
    for i in range(3):
        argv = TORCHRUNS["torchrun"] + ["--nnodes", "2:3", "--nproc_per_node", "2",
                                        "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint,
                                        "--rdzv_id", f"failover{rep}", "--max_restarts", "3",
                                        "--monitor_interval", "0.1", "--no_python"] + worker
        agents.append(procs.start(argv, "torchrun_agent"))
        if i == 0 and not wait_listening(endpoint, monotonic() + 30):  # it hosts the store
            fail(procs, "torchrun: the first agent does not host the store", agents[0])
    # test_worker expands {RANK} itself; torchrun's round 0 has 6 ranks.
    if wait_files(pid_dir, [f"pid_{r}" for r in range(6)], monotonic() + 90) is None:
        fail(procs, "torchrun: round 0 did not start", agents[0])
    killed_at = monotonic()
    agents[0].send_signal(signal.SIGKILL)
    ended = wait_all(agents[1:], killed_at + 120)
    codes = [agent.poll() for agent in agents[1:]]
    procs.finished(agents)
    return (None if ended is None else (ended - killed_at) * 1000), codes


def wait_listening(endpoint, deadline):
    """Polls until something accepts connections at endpoint; False at the deadline."""
    host, port = endpoint.rsplit(":", 1)
    while monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex((host, int(port))) == 0:
                return True
        time.sleep(0.01)
    return False


def fail(procs, what, agent):
    procs.kill_all()
    sys.exit(f"{what}:\n{tail(agent.log_path)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))), "build"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--torchrun-runs", type=int, default=3)
    parser.add_argument("--skip-torchrun", action="store_true")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    scratch = tempfile.mkdtemp(prefix="cohort_failover_bench_")
    procs = Processes(scratch)
    results = {}
    try:
        for name, (conf, lost_by) in CASES.items():
            samples = [cohort_once(args, procs, scratch, rep, conf, lost_by)
                       for rep in range(args.runs)]
            results[name] = samples
            print(f"  cohort ({name}): {statistics.median(samples):.0f} ms", file=sys.stderr)
        torchrun = []
        if not args.skip_torchrun:
            torchrun = [torchrun_once(args, procs, scratch, rep)
                        for rep in range(args.torchrun_runs)]
    finally:
        procs.kill_all()
        shutil.rmtree(scratch, ignore_errors=True)
    print("| what | after the host's loss (median) | runs (ms) |")
    print("|---|---|---|")
    for name, samples in results.items():
        runs = ", ".join(f"{s:.0f}" for s in samples)
        print(f"| cohort --rdzv-fallback, {name}: both survivors' workers run again | "
              f"**{statistics.median(samples):,.0f} ms** | {runs} |")
    if torchrun:
        ended = [ms for ms, _ in torchrun if ms is not None]
        codes = sorted({code for _, cs in torchrun for code in cs})
        median = f"{statistics.median(ended):,.0f} ms" if ended else "did not end in 120 s"
        runs = ", ".join("-" if ms is None else f"{ms:.0f}" for ms, _ in torchrun)
        print(f"| torchrun 1.13: both surviving agents exited (codes {codes}): the job is over | "
              f"{median} | {runs} |")


if __name__ == "__main__":
    main()
