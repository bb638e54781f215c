#!/usr/bin/python3
"""cohortd's store from two builds, A and B, under the same LibTorch 1.13 client load, alternating.

For judging a change to the store server: each repeat starts `cohortd --tcpstore-port 0` of
build A and then of build B (the order alternates), runs `store_bench load --clients N
--seconds S` (from --bench-build, default build) against it, and reads the server's CPU time
(utime + stime from /proc/PID/stat) around the load. Prints, per build, the medians of ops/s and
of server CPU µs per op, and every run's CPU per op. A benchmark: it asserts nothing.

Usage: bench/store_ab.py A_BUILD B_BUILD [--clients 16] [--repeats 7] [--seconds 3] [--threads 1]
e.g.   git worktree add /tmp/old HEAD~1 && cmake -S /tmp/old -B /tmp/old/build -G Ninja \\
         -DCMAKE_BUILD_TYPE=RelWithDebInfo && ninja -C /tmp/old/build cohortd
       bench/store_ab.py /tmp/old/build build --clients 16
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

from proc_stats import cpu_seconds, stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(build, bench, clients, seconds, threads, scratch):
    port_file = os.path.join(scratch, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    server = subprocess.Popen([os.path.join(build, "bin", "cohortd"), "--port", "0",
                               "--tcpstore-port", "0", "--tcpstore-port-file", port_file,
                               "--threads", str(threads)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"{build}: cohortd did not start")
            time.sleep(0.02)
        port = open(port_file).read().strip()
        before = cpu_seconds(server.pid)
        out = subprocess.run([bench, "load", "--port", port, "--clients", str(clients),
                              "--seconds", str(seconds)], capture_output=True, text=True,
                             timeout=seconds + 120, check=True).stdout
        used = cpu_seconds(server.pid) - before
    finally:
        stop(server)
    load = json.loads(out.strip().splitlines()[-1])
    return load["ops_per_s"], used / load["ops"] * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs=2, help="the two build directories, A and B")
    parser.add_argument("--bench-build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--threads", type=int, default=1, help="cohortd's --threads")
    args = parser.parse_args()
    bench = os.path.join(args.bench_build, "bin", "store_bench")
    runs = {build: [] for build in args.builds}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            order = args.builds if repeat % 2 == 0 else args.builds[::-1]
            for build in order:
                runs[build].append(one_run(build, bench, args.clients, args.seconds,
                                           args.threads, scratch))
    print(f"{args.clients} clients, cohortd --threads {args.threads}, {args.repeats} runs each, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    for label, build in zip("AB", args.builds):
        ops = statistics.median(r[0] for r in runs[build])
        cpu = statistics.median(r[1] for r in runs[build])
        each = ", ".join(f"{r[1]:.1f}" for r in runs[build])
        print(f"{label} {build}: {ops:,.0f} ops/s, server CPU {cpu:.2f} µs/op (runs: {each})")


if __name__ == "__main__":
    main()
