#!/usr/bin/python3
"""What waiting agents' questions cost a standby daemon at a --rdzv-fallback endpoint.

An agent that waits for a round (a spare, or any agent of a job still gathering its nodes) asks
each later --rdzv-fallback endpoint whether the run went on there. Starts a cohortd holding the
run at the first endpoint and a standby cohortd (without the run) at the fallback, both with a
token, then --agents `cohort run` agents of a run of one node more, so that all of them wait.
Once every agent is welcomed (and --settle seconds more: the questions' gaps grow), it reads the
standby's accepted control connections (its /metrics) and its CPU time (user + system, from
/proc) over --seconds. Medians of --runs. With --before
PATH, each run is made twice, its agents being the `cohort` at PATH, then this build's, so that
two agent builds are compared under the same load; both daemons are always this build's.

Usage: bench/fallback_questions.py [--build build] [--before PATH] [--agents 30]
                                   [--settle 0] [--seconds 30] [--runs 3]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proc_stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "fallback-questions-bench-0123456789abcdef"


def start_daemon(cohortd, scratch, name, token_file, http=False):
    """A cohortd on loopback; its process, control port and HTTP port (or None)."""
    port_file = os.path.join(scratch, name + ".port")
    http_file = os.path.join(scratch, name + ".http")
    for stale in (port_file, http_file):  # an earlier run's
        if os.path.exists(stale):
            os.remove(stale)
    argv = [cohortd, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
            "--token-file", token_file]
    if http:
        argv += ["--http-port", "0", "--http-port-file", http_file]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = proc_stats.wait_for_port_file(port_file, proc, 10, name)
    http_port = proc_stats.wait_for_port_file(http_file, proc, 10, name) if http else None
    return proc, port, http_port


def accepted(http_port):
    """The standby's cohort_control_connections_accepted_total."""
    request = urllib.request.Request(f"http://127.0.0.1:{http_port}/metrics")
    request.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(request, timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("cohort_control_connections_accepted_total "):
                return float(line.split()[1])
    sys.exit("no cohort_control_connections_accepted_total in the standby's /metrics")


def nodes_at(cohort, port, token_file):
    """How many nodes the daemon at `port` lists for run 'wait'."""
    done = subprocess.run([cohort, "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                           "--token-file", token_file, "--rdzv-id", "wait", "--json"],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return 0
    runs = json.loads(done.stdout).get("runs", [])
    return len(runs[0].get("nodes", [])) if runs else 0


def one_run(build, agent_bin, agents, settle, seconds, scratch):
    token_file = os.path.join(scratch, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    cohortd = os.path.join(build, "bin", "cohortd")
    first, first_port, _ = start_daemon(cohortd, scratch, "first", token_file)
    standby, standby_port, http_port = start_daemon(cohortd, scratch, "standby", token_file, True)
    nodes = []
    try:
        for i in range(agents):
            nodes.append(subprocess.Popen(
                [agent_bin, "run", "--nnodes", str(agents + 1), "--nproc-per-node", "1",
                 "--rdzv-endpoint", f"127.0.0.1:{first_port}",
                 "--rdzv-fallback", f"127.0.0.1:{standby_port}", "--rdzv-id", "wait",
                 "--token-file", token_file, "--rdzv-conf", "join_timeout=600",
                 "--local-addr", f"127.0.1.{i + 1}", "--no-python", "/bin/sleep", "600"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while nodes_at(os.path.join(build, "bin", "cohort"), first_port, token_file) < agents:
            if time.monotonic() > deadline:
                sys.exit(f"the {agents} agents did not all join within 60 s")
            time.sleep(0.2)
        time.sleep(settle)
        count0, cpu0, t0 = accepted(http_port), proc_stats.cpu_seconds(standby.pid), time.time()
        time.sleep(seconds)
        count1, cpu1, t1 = accepted(http_port), proc_stats.cpu_seconds(standby.pid), time.time()
        # The /metrics request itself is HTTP, not a control connection: not counted.
        return (count1 - count0) / (t1 - t0), (cpu1 - cpu0) / (t1 - t0)
    finally:
        for node in nodes:
            node.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(timeout=15)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
        proc_stats.stop(standby)
        proc_stats.stop(first)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--before", help="another build's cohort, for its agents")
    parser.add_argument("--agents", type=int, default=30)
    parser.add_argument("--settle", type=float, default=0)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    builds = ([("before", args.before)] if args.before else []) + [
        ("this build", os.path.join(args.build, "bin", "cohort"))]
    results = {name: [] for name, _ in builds}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for name, agent_bin in builds:
                results[name].append(one_run(args.build, agent_bin, args.agents, args.settle,
                                             args.seconds, scratch))
                rate, cpu = results[name][-1]
                print(f"# {name}: {rate:.2f} questions/s, {cpu * 1000:.1f} ms CPU/s",
                      file=sys.stderr)
    print(f"| agents' build | {args.agents} agents waiting, {args.seconds:g} s from "
          f"{args.settle:g} s after they joined, medians of {args.runs} | questions/s at the "
          "standby | per agent | standby CPU ms/s |")
    print("|---|---|---:|---:|---:|")
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"| {name} | | {rate:.2f} | {rate / args.agents:.3f} | {cpu * 1000:.1f} |")


if __name__ == "__main__":
    main()
