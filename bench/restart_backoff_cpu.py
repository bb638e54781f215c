#!/usr/bin/python3
"""What cohortd's CPU costs while an elastic job restarts, backoff after backoff.

Starts cohortd on loopback, then runs `cohort run --nnodes 1:2 --max-restarts N` of a worker that
fails at once, each time with a different line (so the crash-loop rule does not stop it): every
restart waits out the restart policy's backoff (10 ms, 40 ms, ... 2.56 s, then 5 s) with the one
node back and the last call (2 s) over. Reports the run's wall time and the daemon's CPU time
(user + system, from /proc), medians of --runs. A daemon that sleeps through the backoff costs
milliseconds; one whose timer fires again and again costs a core for as long as the wait.
--cohortd and --cohort measure other builds under the same load.

Usage: bench/restart_backoff_cpu.py [--build build] [--cohortd PATH] [--cohort PATH]
                                    [--restarts 6] [--runs 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proc_stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# $$$$: cohort run expands its script's arguments as torchrun does, "$$" to "$".
WORKER = 'echo "failure $$$$" >&2; exit 1'


def one_run(cohortd, cohort, restarts, scratch):
    port_file = os.path.join(scratch, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    daemon = subprocess.Popen(
        [cohortd, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = proc_stats.wait_for_port_file(port_file, daemon, 10, "cohortd")
        before = proc_stats.cpu_seconds(daemon.pid)
        start = time.perf_counter()
        done = subprocess.run(
            [cohort, "run", "--nnodes", "1:2", "--nproc-per-node", "1",
             "--max-restarts", str(restarts), "--rdzv-endpoint", f"127.0.0.1:{port}",
             "--rdzv-id", "backoff", "--no-python", "--", "/bin/sh", "-c", WORKER],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        wall = time.perf_counter() - start
        if done.returncode != 1:
            sys.exit(f"cohort run exited {done.returncode}, expected 1 (the workers' failure)")
        return wall, proc_stats.cpu_seconds(daemon.pid) - before
    finally:
        proc_stats.stop(daemon)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--cohortd")
    parser.add_argument("--cohort")
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cohortd = args.cohortd or os.path.join(args.build, "bin", "cohortd")
    cohort = args.cohort or os.path.join(args.build, "bin", "cohort")
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            wall, cpu = one_run(cohortd, cohort, args.restarts, scratch)
            walls.append(wall)
            cpus.append(cpu)
    print(f"| {cohortd} | {args.restarts} | {statistics.median(walls):.2f} s "
          f"| {statistics.median(cpus) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
