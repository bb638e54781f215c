#!/usr/bin/python3
"""From a hang declared to the culprit rank named, at 1,024 ranks across 128 simulated agents.

Starts a fresh cohortd (--port 0) per run and runs bench's rdzv_sim_bench --hang 1 against it:
128 control connections from one process form a round of 1,024 ranks (8 per agent); agent 0
declares a hang; the daemon asks the 127 others for their flight-recorder dumps; each answers at
once (the dump wait itself, --hang-dump-timeout, is PyTorch's time and is left out) with its 8
ranks' records, in which rank 13 never enqueued all_reduce #4120; agent 0 sends its own records
and its failure report. Measured: from the hang declared until the first agent's `stop` names
rank 13 (the daemon's verdict), and until every agent has it. Medians of --runs runs.

Usage: bench/hang_attribution_bench.py [--build build] [--runs 7] [--agents 128]
Prints a Markdown table (paste it into docs/BENCHMARKS.md) and one JSON line per run to stderr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(build, agents):
    with tempfile.TemporaryDirectory() as scratch:
        port_file = os.path.join(scratch, "port")
        daemon = subprocess.Popen(
            [os.path.join(build, "bin", "cohortd"), "--port", "0", "--port-file", port_file],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(port_file) or not open(port_file).read().strip():
                if time.monotonic() > deadline:
                    raise RuntimeError("cohortd wrote no port file")
                time.sleep(0.01)
            port = open(port_file).read().strip()
            result = subprocess.run(
                [os.path.join(build, "bin", "rdzv_sim_bench"), "--port", port, "--agents",
                 str(agents), "--hang", "1", "--timeout-s", "60"],
                capture_output=True, text=True, timeout=90)
            line = json.loads(result.stdout.strip().splitlines()[-1])
            print(json.dumps(line), file=sys.stderr)
            if result.returncode != 0 or line["error"]:
                raise RuntimeError("run failed: " + line["error"])
            return line
        finally:
            daemon.kill()
            daemon.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--agents", type=int, default=128)
    args = parser.parse_args()
    runs = [one_run(args.build, args.agents) for _ in range(args.runs)]
    verdict = statistics.median(run["hang_to_verdict_ms"] for run in runs)
    every = statistics.median(run["hang_to_every_stop_ms"] for run in runs)
    worst = max(run["hang_to_every_stop_ms"] for run in runs)
    print("| agents | ranks | hang to verdict (ms) | hang to every agent told (ms) | worst (ms) |")
    print("|---|---|---|---|---|")
    print(f"| {args.agents} | {runs[0]['ranks']} | {verdict:.1f} | {every:.1f} | {worst:.1f} |")


if __name__ == "__main__":
    main()
