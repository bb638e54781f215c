#!/usr/bin/python3
"""Multi-node rendezvous and recovery of cohort, side by side with torchrun's c10d rendezvous.

All "nodes" run on this machine: agents advertise loopback addresses 127.0.0.2, 127.0.0.3, ...
Measures, in one run:
  latency   N = 2, 4, 8 agents, --nnodes N fixed, 1 worker each (/bin/true, --no-python): the time
            from starting the N agents at once until every agent exited 0 (rendezvous, spawn and
            completion). cohort: `cohort run` agents against a cohortd started beforehand (outside
            the timed part); torchrun: Debian's PyTorch 1.13 torchrun (tests/integration/
            torchrun_debian12.py, --rdzv_backend c10d, the first agent hosts the store,
            --monitor_interval 0.1); with --torch2 also torchrun 2.6 (Debian 13's, in the root
            scripts/setup makes, each agent started through scripts/in-torch2, whose own cost is
            reported: `in-torch2 /bin/true`). A second series uses a tiny C worker that writes its start
            time (CLOCK_MONOTONIC) to a file, to report the time until every worker had started.
  recovery  3 cohort agents x 2 hanging test_workers, --nnodes 2:3; SIGKILL one agent; the time
            until every survivor's workers of round 1 wrote their pid files. (torchrun has no
            equivalent: its agents do not notice a lost peer while their own workers hang.)
  simulated bench's rdzv_sim_bench opens 1,000 and 10,000 control connections from one process
            against a fresh cohortd: time until every connection has its round, until every one
            has `complete`, and the daemon's peak memory (VmHWM).

Usage: bench/rendezvous_bench.py [--build build] [--runs 10] [--torchrun-runs 3]
           [--recovery-runs 7] [--sim-runs 3] [--sim-agents 1000,10000] [--skip-torchrun]
           [--only latency,recovery,simulated] [--cohortd PATH (another daemon build)] [--torch2]
Prints Markdown tables (paste them into docs/BENCHMARKS.md). Every process it starts is killed
at the end (agents run in their own sessions; anything left in those sessions is SIGKILLed).
"""
import argparse
import json
import os
import resource
import select
import shutil
import signal
import socket
import statistics
import urllib.request
import subprocess
import sys
import tempfile
import time

from proc_stats import cpu_seconds, status_kib, stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = os.path.join(ROOT, "tests", "integration", "torchrun_debian12.py")
TORCH_PYTHON = "/usr/bin/python3"
IN_TORCH2 = os.path.join(ROOT, "scripts", "in-torch2")
TORCHRUNS = {"torchrun": [TORCH_PYTHON, TORCHRUN],
             "torchrun 2.6": [IN_TORCH2, "/usr/bin/torchrun"]}
RUN_TIMEOUT_S = 180

STAMP_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* Writes CLOCK_MONOTONIC at start to DIR/start_$RANK, then exits 0. */
int main(int argc, char** argv) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (argc < 2) return 2;
  const char* rank = getenv("RANK");
  char path[4096];
  snprintf(path, sizeof path, "%s/start_%s", argv[1], rank ? rank : "x");
  FILE* file = fopen(path, "w");
  if (!file) return 1;
  fprintf(file, "%lld.%09ld\n", (long long)now.tv_sec, now.tv_nsec);
  return fclose(file) == 0 ? 0 : 1;
}
"""


def monotonic():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def session_members(sid):
    """Pids of every process whose session id is sid (read from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after the command: state ppid pgrp session ...
            pids.append(int(entry))
    return pids


class Processes:
    """Every process the bench starts; each in its own session, all killed at the end."""

    def __init__(self, scratch):
        self.scratch = scratch
        self.sessions = []
        self.count = 0

    def start(self, argv, name, env=None, preexec_fn=None):
        self.count += 1
        log = open(os.path.join(self.scratch, f"{name}_{self.count}.log"), "wb")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=preexec_fn)
        proc.log_path = log.name
        log.close()
        self.sessions.append(proc.pid)
        return proc

    def finished(self, procs):
        """Kills what is left in the sessions of these (exited) processes and forgets them."""
        for proc in procs:
            for pid in session_members(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if proc.pid in self.sessions:
                self.sessions.remove(proc.pid)

    def kill_all(self):
        for _ in range(3):
            left = [pid for sid in self.sessions for pid in session_members(sid)]
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        self.sessions = [sid for sid in self.sessions if session_members(sid)]


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def wait_all(procs, deadline):
    """Waits for every process; returns the time the last one exited, or None on timeout.

    Waits on pidfds: Popen.wait(timeout) polls with sleeps of up to 50 ms, too coarse here."""
    for proc in procs:
        if proc.poll() is not None:
            continue
        pidfd = os.pidfd_open(proc.pid)
        try:
            readable, _, _ = select.select([pidfd], [], [], max(deadline - monotonic(), 0))
        finally:
            os.close(pidfd)
        if not readable:
            return None
        proc.wait()
    return monotonic()


def wait_files(directory, names, deadline, interval=0.0005):
    """Polls until every file in names exists in directory; returns the time, or None."""
    wanted = set(names)
    while monotonic() < deadline:
        if wanted.issubset(os.listdir(directory)):
            return monotonic()
        time.sleep(interval)
    return None


def start_cohortd(procs, args, scratch, name, http=False):
    """(daemon, control port), and its HTTP port too when `http`."""
    port_file = os.path.join(scratch, f"{name}.port")
    http_file = os.path.join(scratch, f"{name}.http")
    argv = [args.cohortd, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file]
    if http:
        argv += ["--http-port", "0", "--http-port-file", http_file]
    daemon = procs.start(argv, name, preexec_fn=raise_fd_limit)
    deadline = monotonic() + 10
    while not os.path.exists(port_file) or (http and not os.path.exists(http_file)):
        if monotonic() > deadline or daemon.poll() is not None:
            sys.exit(f"cohortd did not start:\n{tail(daemon.log_path)}")
        time.sleep(0.002)
    with open(port_file) as f:
        port = int(f.read())
    if not http:
        return daemon, port
    with open(http_file) as f:
        return daemon, port, int(f.read())


def scrape_metrics(http_port, times):
    """Times `times` GETs of /metrics: (median ms, bytes of the last answer, its text)."""
    spent, text = [], ""
    for _ in range(times):
        begun = monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=30) as answer:
            text = answer.read().decode()
        spent.append((monotonic() - begun) * 1000)
    return statistics.median(spent), len(text), text


def one_launch(procs, argvs, stamp_dir, nodes, what):
    """Starts the agents at once; returns (ms until all exited 0, ms until all workers started)."""
    if stamp_dir:
        for entry in os.listdir(stamp_dir):
            os.remove(os.path.join(stamp_dir, entry))
    start = monotonic()
    agents = [procs.start(argv, f"{what}_agent") for argv in argvs]
    end = wait_all(agents, start + RUN_TIMEOUT_S)
    for agent in agents:
        if agent.returncode != 0:
            procs.kill_all()
            sys.exit(f"{what}: an agent exited {agent.returncode} (or timed out):\n"
                     f"{tail(agent.log_path)}")
    procs.finished(agents)
    started = None
    if stamp_dir:
        stamps = []
        for rank in range(nodes):
            with open(os.path.join(stamp_dir, f"start_{rank}")) as f:
                stamps.append(float(f.read()))
        started = (max(stamps) - start) * 1000
    return (end - start) * 1000, started


def cohort_agents(build, port, run_id, nodes, worker):
    cohort = os.path.join(build, "bin", "cohort")
    return [[cohort, "run", "--nnodes", str(nodes), "--nproc-per-node", "1", "--rdzv-backend",
             "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
             "--local-addr", f"127.0.0.{2 + i}", "--no-python"] + worker for i in range(nodes)]


def torchrun_agents(torchrun, port, run_id, nodes, worker):
    argvs = []
    for i in range(nodes):
        host = "true" if i == 0 else "false"
        argvs.append(TORCHRUNS[torchrun] + ["--nnodes", str(nodes), "--nproc_per_node", "1",
                      "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                      "--rdzv_id", run_id, "--rdzv_conf", f"is_host={host}",
                      "--monitor_interval", "0.1", "--no_python"] + worker)
    return argvs


def latency(args, procs, scratch, stamp):
    """{(launcher, nodes): {"exit": [ms...], "started": [ms...], "stamp_exit": [ms...]}}."""
    results = {}
    stamp_dir = os.path.join(scratch, "stamps")
    os.makedirs(stamp_dir, exist_ok=True)
    daemon, port = start_cohortd(procs, args, scratch, "cohortd_latency")
    sequence = 0
    for nodes in args.nodes:
        for launcher in ("cohort", "torchrun", "torchrun 2.6"):
            if launcher != "cohort" and args.skip_torchrun:
                continue
            if launcher == "torchrun 2.6" and not args.torch2:
                continue
            runs = args.runs if launcher == "cohort" else args.torchrun_runs
            entry = results.setdefault((launcher, nodes), {"exit": [], "started": [],
                                                           "stamp_exit": []})
            for rep in range(runs):
                for worker, key in ((["/bin/true"], "exit"), ([stamp, stamp_dir], "stamp")):
                    sequence += 1
                    run_id = f"job{sequence}"
                    if launcher == "cohort":
                        argvs = cohort_agents(args.build, port, run_id, nodes, worker)
                    else:
                        argvs = torchrun_agents(launcher, free_port(), run_id, nodes, worker)
                    exited, started = one_launch(procs, argvs,
                                                 stamp_dir if key == "stamp" else None, nodes,
                                                 launcher)
                    if key == "exit":
                        entry["exit"].append(exited)
                    else:
                        entry["stamp_exit"].append(exited)
                        entry["started"].append(started)
            print(f"  {launcher} x{nodes}: exit {statistics.median(entry['exit']):.1f} ms, "
                  f"workers started {statistics.median(entry['started']):.1f} ms",
                  file=sys.stderr)
    stop(daemon)
    if args.torch2:
        samples = []
        for _ in range(args.runs):
            start = monotonic()
            subprocess.run([IN_TORCH2, "/bin/true"], check=True)
            samples.append((monotonic() - start) * 1000)
        results["in-torch2"] = samples
    return results


def recovery(args, procs, scratch):
    """ms from SIGKILL of one of 3 agents until both survivors' round-1 workers are up."""
    worker_bin = os.path.join(args.build, "bin", "test_worker")
    cohort = os.path.join(args.build, "bin", "cohort")
    daemon, port = start_cohortd(procs, args, scratch, "cohortd_recovery")
    samples = []
    for rep in range(args.recovery_runs):
        pid_dir = os.path.join(scratch, f"recovery_{rep}")
        os.makedirs(pid_dir)
        worker = [worker_bin, "--hang", "--pid-file",
                  os.path.join(pid_dir, "pid_{TORCHELASTIC_RESTART_COUNT}_{RANK}")]
        agents = [procs.start([cohort, "run", "--nnodes", "2:3", "--nproc-per-node", "2",
                               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                               "--rdzv-id", f"recovery{rep}", "--local-addr", f"127.0.0.{2 + i}",
                               "--no-python"] + worker, "recovery_agent") for i in range(3)]
        if wait_files(pid_dir, [f"pid_0_{r}" for r in range(6)], monotonic() + 20) is None:
            procs.kill_all()
            sys.exit(f"recovery: round 0 did not start:\n{tail(agents[0].log_path)}")
        time.sleep(0.2)  # let round 0 settle
        killed_at = monotonic()
        agents[2].send_signal(signal.SIGKILL)  # 127.0.0.4: group rank 2, ranks 4 and 5
        up = wait_files(pid_dir, [f"pid_1_{r}" for r in range(4)], killed_at + 20)
        if up is None:
            procs.kill_all()
            sys.exit(f"recovery: round 1 did not start:\n{tail(agents[0].log_path)}")
        samples.append((up - killed_at) * 1000)
        for agent in agents:
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
        if wait_all(agents, monotonic() + 20) is None:
            procs.kill_all()
    stop(daemon)
    print(f"  recovery: {statistics.median(samples):.1f} ms", file=sys.stderr)
    return samples


def simulated(args, procs, scratch):
    """{agents: [{"round_ms", "complete_ms", "hwm_kib", ...}, ...]}."""
    sim = os.path.join(args.build, "bin", "rdzv_sim_bench")
    results = {}
    for agents in args.sim_agents:
        for rep in range(args.sim_runs):
            name = f"cohortd_sim{agents}_{rep}"
            if args.sim_metrics:
                daemon, port, http_port = start_cohortd(procs, args, scratch, name, http=True)
            else:
                daemon, port = start_cohortd(procs, args, scratch, name)
            idle_kib = status_kib(daemon.pid)
            argv = [sim, "--port", str(port), "--agents", str(agents), "--timeout-s",
                    str(args.sim_timeout)]
            scraped = None
            if args.sim_metrics:
                # Every agent holds its round for a while: /metrics is scraped then, with
                # every node a member.
                argv += ["--hold-ms", "5000"]
                runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, preexec_fn=raise_fd_limit)
                for line in runner.stderr:
                    if "every agent has its round" in line:
                        scraped = scrape_metrics(http_port, 5)
                        break
                out, err = runner.communicate(timeout=args.sim_timeout + 30)
                done = subprocess.CompletedProcess(argv, runner.returncode, out, err)
            else:
                done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, timeout=args.sim_timeout + 30,
                                      preexec_fn=raise_fd_limit)
            hwm = status_kib(daemon.pid)
            cpu = cpu_seconds(daemon.pid)
            stop(daemon)
            lines = done.stdout.strip().splitlines()
            if done.returncode != 0 or not lines:
                procs.kill_all()
                sys.exit(f"rdzv_sim_bench failed ({done.returncode}): {done.stdout} {done.stderr}\n"
                         f"{tail(daemon.log_path)}")
            sample = json.loads(lines[-1])
            sample["hwm_kib"] = hwm
            sample["idle_kib"] = idle_kib
            sample["cpu_s"] = cpu
            if scraped:
                sample["metrics_ms"], sample["metrics_bytes"], text = scraped
                events = [line for line in text.splitlines()
                          if line.startswith("cohort_events_total ")]
                sample["events"] = float(events[0].split()[1]) if events else 0
            results.setdefault(agents, []).append(sample)
            print(f"  simulated x{agents}: round {sample['round_ms']:.0f} ms, complete "
                  f"{sample['complete_ms']:.0f} ms, {sample['waiting_messages']} waiting messages, "
                  f"daemon peak {hwm / 1024:.1f} MiB", file=sys.stderr)
    return results


def median(values):
    return statistics.median(values) if values else float("nan")


def print_tables(args, lat, rec, sim):
    if lat:
        print("| agents (1 x /bin/true each) | cohort: all exited 0 (min-max) | "
              "cohort: all workers started "
              "| torchrun: all exited 0 | torchrun: all workers started | torchrun / cohort |")
        print("|---|---|---|---|---|---|")
        for nodes in args.nodes:
            c = lat[("cohort", nodes)]
            t = lat.get(("torchrun", nodes))
            spread = f"{min(c['exit']):.0f}-{max(c['exit']):.0f}"
            row = (f"| {nodes} | {median(c['exit']):.1f} ms ({spread}) | "
                   f"{median(c['started']):.1f} ms | ")
            if t:
                row += (f"{median(t['exit']):.0f} ms | {median(t['started']):.0f} ms | "
                        f"{median(t['exit']) / median(c['exit']):.0f}x |")
            else:
                row += "- | - | - |"
            print(row)
        print()
        print(f"medians of {args.runs} (cohort) and {args.torchrun_runs} (torchrun) runs; 'all "
              "workers started' is a second series whose worker writes its start time "
              "(all exited 0 in that series: cohort "
              + ", ".join(f"{median(lat[('cohort', n)]['stamp_exit']):.1f}" for n in args.nodes)
              + " ms" + ("" if args.skip_torchrun else ", torchrun " + ", ".join(
                  f"{median(lat[('torchrun', n)]['stamp_exit']):.0f}" for n in args.nodes) + " ms")
              + f" for {', '.join(map(str, args.nodes))} agents)")
        print()
        if args.torch2 and not args.skip_torchrun:
            print("| agents (1 x /bin/true each) | cohort: all exited 0 | torchrun 2.6: all exited 0 "
                  "| torchrun 2.6: all workers started | torchrun 2.6 / cohort | "
                  "torchrun 2.6 / torchrun 1.13 |")
            print("|---|---|---|---|---|---|")
            for nodes in args.nodes:
                c, t, t2 = (lat[(name, nodes)] for name in ("cohort", "torchrun", "torchrun 2.6"))
                print(f"| {nodes} | {median(c['exit']):.1f} ms | {median(t2['exit']):.0f} ms | "
                      f"{median(t2['started']):.0f} ms | "
                      f"{median(t2['exit']) / median(c['exit']):.0f}x | "
                      f"{median(t2['exit']) / median(t['exit']):.2f}x |")
            print()
            print(f"torchrun 2.6 agents start through scripts/in-torch2: `in-torch2 /bin/true` took "
                  f"{median(lat['in-torch2']):.0f} ms (median of {args.runs}); all exited 0 in "
                  "the timestamp series: " + ", ".join(
                      f"{median(lat[('torchrun 2.6', n)]['stamp_exit']):.0f}" for n in args.nodes)
                  + " ms")
            print()
    if rec:
        print("| recovery: 3 agents x 2 hanging workers, --nnodes 2:3, SIGKILL one agent | "
              "median | min | max |")
        print("|---|---|---|---|")
        print(f"| cohort: until both survivors' round-1 workers are up | {median(rec):.0f} ms | "
              f"{min(rec):.0f} ms | {max(rec):.0f} ms |")
        print("| torchrun | never (the survivors' agents see healthy, hanging workers; only the "
              "collective timeout ends them) | | |")
        print()
        print(f"{len(rec)} runs: " + ", ".join(f"{x:.0f}" for x in rec) + " ms")
        print()
    if sim:
        print("| simulated agents (one process) | all have `round` | all have `complete` | "
              "waiting messages | cohortd peak RSS (VmHWM) | idle cohortd | cohortd CPU time |")
        print("|---|---|---|---|---|---|---|")
        for agents, samples in sim.items():
            print(f"| {agents:,} | {median([s['round_ms'] for s in samples]):.0f} ms | "
                  f"{median([s['complete_ms'] for s in samples]):.0f} ms | "
                  f"{int(median([s['waiting_messages'] for s in samples])):,} | "
                  f"{median([s['hwm_kib'] for s in samples]) / 1024:.1f} MiB | "
                  f"{median([s['idle_kib'] for s in samples]) / 1024:.1f} MiB | "
                  f"{median([s['cpu_s'] for s in samples]) * 1000:.0f} ms |")
        if args.sim_metrics:
            print()
            print("| simulated agents | GET /metrics with every node a member | its size | "
                  "events recorded | cohortd CPU time / events |")
            print("|---|---|---|---|---|")
            for agents, samples in sim.items():
                events = median([s.get("events", 0) for s in samples])
                per_event = (f"{median([s['cpu_s'] for s in samples]) * 1e6 / events:.0f} us"
                             if events else "-")
                print(f"| {agents:,} | {median([s['metrics_ms'] for s in samples]):.1f} ms | "
                      f"{median([s['metrics_bytes'] for s in samples]) / 1024:.0f} KiB | "
                      f"{events:,.0f} | {per_event} |")
        print()
        print(f"medians of {args.sim_runs} runs; a fresh cohortd for each run")
        print()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"machine: {os.cpu_count()} CPUs; descriptor limit (soft/hard after raising) "
          f"{soft}/{hard}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--cohortd", help="the daemon to measure (default: BUILD/bin/cohortd)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--torchrun-runs", type=int, default=3)
    parser.add_argument("--recovery-runs", type=int, default=7)
    parser.add_argument("--sim-runs", type=int, default=3)
    parser.add_argument("--sim-timeout", type=int, default=120)
    parser.add_argument("--nodes", default="2,4,8")
    parser.add_argument("--sim-agents", default="1000,10000")
    parser.add_argument("--skip-torchrun", action="store_true")
    parser.add_argument("--sim-metrics", action="store_true",
                        help="simulated: cohortd serves /metrics, scraped 5 times while every "
                             "agent holds its round (adds 5 s per run)")
    parser.add_argument("--torch2", action="store_true",
                        help="also torchrun 2.6 from the root of scripts/in-torch2 (latency)")
    parser.add_argument("--only", default="latency,recovery,simulated")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    args.cohortd = os.path.abspath(args.cohortd or os.path.join(args.build, "bin", "cohortd"))
    args.nodes = [int(n) for n in args.nodes.split(",")]
    args.sim_agents = [int(n) for n in args.sim_agents.split(",")]
    only = set(args.only.split(","))
    raise_fd_limit()

    scratch = tempfile.mkdtemp(prefix="cohort_rdzv_bench_")
    procs = Processes(scratch)
    lat, rec, sim = {}, [], {}
    try:
        if "latency" in only:
            stamp = os.path.join(scratch, "stamp_worker")
            subprocess.run(["cc", "-O2", "-o", stamp, "-x", "c", "-"], input=STAMP_SOURCE,
                           text=True, check=True)
            lat = latency(args, procs, scratch, stamp)
        if "recovery" in only:
            rec = recovery(args, procs, scratch)
        if "simulated" in only:
            sim = simulated(args, procs, scratch)
    finally:
        procs.kill_all()
        shutil.rmtree(scratch, ignore_errors=True)
    print_tables(args, lat, rec, sim)


if __name__ == "__main__":
    main()
