#!/usr/bin/env python3
"""What an agent's question costs the daemon: a brief status beside the full one (docs/BENCHMARKS.md,
"An agent's question after a heal: a brief status").

After a network heals, every node that moved asks the daemon it left (and every node that waited
asks the later fallbacks) whether the run's other nodes are there: a thousand cut-off nodes ask
at once. Each run: a fresh cohortd, bench/rdzv_sim_bench with --agents simulated agents holding
their round, then --queries status requests one after another, each on a fresh connection, for
run "sim": full (what `cohort status` asks, up to 2,000 nodes listed) or brief (what
rendezvous/run_probe.* asks: the count of live nodes, none listed), the two kinds alternating run
by run. Reported: the median time per request (connect, challenge, answer), the daemon's CPU per
request (from /proc, over all the requests), the reply's bytes. Medians over --runs.

Usage: bench/status_brief.py [--build build] [--agents 10000] [--queries 50] [--runs 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from growth_bench import raise_fd_limit, start_cohortd
from proc_stats import stop


def one_run(args, scratch, brief, rep):
    daemon, port = start_cohortd(args.cohortd, scratch, f"{'brief' if brief else 'full'}{rep}")
    try:
        argv = [os.path.join(args.build, "bin", "rdzv_sim_bench"), "--port", str(port),
                "--agents", str(args.agents), "--timeout-s", "120",
                "--status-queries", str(args.queries), "--brief-status", "1" if brief else "0",
                "--daemon-pid", str(daemon.pid)]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=180, preexec_fn=raise_fd_limit)
    finally:
        stop(daemon)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        sys.exit(f"rdzv_sim_bench failed ({done.returncode}): {done.stdout} {done.stderr}")
    sample = json.loads(lines[-1])
    return {"ms": sample["status_ms_median"],
            "cpu_ms": sample["daemon_cpu_status_s"] * 1000 / args.queries,
            "bytes": sample["status_reply_bytes"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--cohortd", help="the daemon to measure (default: BUILD/bin/cohortd)")
    parser.add_argument("--agents", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    args.cohortd = args.cohortd or os.path.join(args.build, "bin", "cohortd")
    samples = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="cohort_status_brief_") as scratch:
        for rep in range(args.runs):
            for brief in (False, True):
                samples[brief].append(one_run(args, scratch, brief, rep))
                print(f"  run {rep} {'brief' if brief else 'full'}: {samples[brief][-1]}",
                      file=sys.stderr)
    print(f"| {args.agents:,} agents, {args.queries} requests per run, medians of {args.runs} "
          "| per request | daemon CPU per request | reply |")
    print("|---|---|---|---|")
    for brief, label in ((False, "full status (`cohort status`)"),
                         (True, "brief status (an agent's question)")):
        runs = samples[brief]
        print(f"| {label} | {statistics.median(r['ms'] for r in runs):.2f} ms | "
              f"{statistics.median(r['cpu_ms'] for r in runs):.3f} ms | "
              f"{statistics.median(r['bytes'] for r in runs):,.0f} bytes |")


if __name__ == "__main__":
    main()
