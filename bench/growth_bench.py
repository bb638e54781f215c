#!/usr/bin/env python3
"""Growth of the rendezvous daemon's cost with the number of agents (docs/BENCHMARKS.md, "Growth
to 100,000 agents").

Two parts, both written to one JSON file (--json, by default bench/results/growth.json):

socket: a fresh cohortd per run and bench/rdzv_sim_bench against it, one control connection per
  simulated agent (so at most about 19,000 agents under a 20,000-descriptor limit): the time until
  every agent has its round, then 5 heartbeats from every agent (until every ack), 5 status
  requests (each on a fresh connection) while every agent is a member, then a worker failure on
  agent 0 and the restart (from the failure report until every agent has its next round), then
  every agent succeeds. The bench reads cohortd's CPU time and RSS from /proc at each phase's
  edges; this driver reads its peak RSS (VmHWM) and CPU time before it stops it.
core: bench/rdzv_core_bench, the daemon's per-agent work without the kernel, in one process, up to
  100,000 agents: with the daemon's fixed 500 ms waiting refresh, and with the period that grows
  with the nodes that wait (rdzv::waiting_refresh_interval).

Usage (from the repository root):
  bench/growth_bench.py --build build [--cohortd PATH] [--parts socket,core] [--socket-agents 1000,2000,5000,10000] [--socket-runs 5]
      [--core-agents 1000,10000,50000,100000] [--core-runs 5] [--json bench/results/growth.json]
Plot: bench/plot_growth.py bench/results/growth.json docs/growth.png
"""

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from proc_stats import cpu_seconds, status_kib, stop


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def start_cohortd(cohortd, scratch, name):
    port_file = os.path.join(scratch, f"{name}.port")
    log = open(os.path.join(scratch, f"{name}.log"), "w")
    daemon = subprocess.Popen([cohortd, "--host", "127.0.0.1", "--port", "0", "--port-file",
                               port_file], stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=raise_fd_limit)
    deadline = time.monotonic() + 10
    while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
        if time.monotonic() > deadline or daemon.poll() is not None:
            daemon.kill()
            sys.exit(f"cohortd did not start (see {log.name})")
        time.sleep(0.005)
    with open(port_file) as f:
        return daemon, int(f.read())


def kernel_kib():
    """The machine's slab memory (KiB): sockets' kernel objects live there."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Slab:"):
                return int(line.split()[1])
    return 0


def socket_run(args, agents, scratch, name):
    daemon, port = start_cohortd(args.cohortd, scratch, name)
    try:
        idle_kib = status_kib(daemon.pid, "VmRSS")
        slab_before = kernel_kib()
        argv = [os.path.join(args.build, "bin", "rdzv_sim_bench"), "--port", str(port),
                "--agents", str(agents), "--timeout-s", str(args.timeout), "--heartbeats", "5",
                "--status-queries", "5", "--restart", "1", "--daemon-pid", str(daemon.pid)]
        runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=raise_fd_limit)
        slab_round = None
        for line in runner.stderr:  # the bench ends by itself at --timeout-s
            if "every agent has its round" in line:
                slab_round = kernel_kib()
                break
        out, err = runner.communicate(timeout=args.timeout + 30)
        hwm = status_kib(daemon.pid, "VmHWM")
        cpu = cpu_seconds(daemon.pid)
    finally:
        stop(daemon)
    lines = out.strip().splitlines()
    if runner.returncode != 0 or not lines:
        sys.exit(f"rdzv_sim_bench failed ({runner.returncode}): {out} {err}")
    sample = json.loads(lines[-1])
    sample.update(idle_kib=idle_kib, hwm_kib=hwm, cpu_s=cpu, loadavg=os.getloadavg()[0])
    if slab_round is not None:
        # Both ends of every connection are on this machine: 2 sockets per agent.
        sample["slab_delta_kib"] = slab_round - slab_before
    return sample


def core_run(args, agents, scaled):
    argv = [os.path.join(args.build, "bin", "rdzv_core_bench"), "--agents", str(agents),
            "--heartbeats", "5", "--status-queries", "5", "--scaled-refresh",
            "1" if scaled else "0"]
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=args.timeout)
    if done.returncode != 0:
        sys.exit(f"rdzv_core_bench failed ({done.returncode}): {done.stderr}")
    sample = json.loads(done.stdout.strip().splitlines()[-1])
    sample["loadavg"] = os.getloadavg()[0]
    return sample


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--cohortd", help="the daemon to measure (default: BUILD/bin/cohortd)")
    parser.add_argument("--parts", default="socket,core")
    parser.add_argument("--socket-key", default="socket",
                        help="where the socket runs go in the JSON (another daemon build: "
                             "another key)")
    parser.add_argument("--socket-agents", type=ints, default=[1000, 2000, 5000, 10000])
    parser.add_argument("--socket-runs", type=int, default=5)
    parser.add_argument("--core-agents", type=ints, default=[1000, 10000, 50000, 100000])
    parser.add_argument("--core-runs", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=180, help="seconds per bench process")
    parser.add_argument("--json", default="bench/results/growth.json")
    args = parser.parse_args()
    args.cohortd = args.cohortd or os.path.join(args.build, "bin", "cohortd")
    if "socket" not in args.parts:
        args.socket_runs = 0
    if "core" not in args.parts:
        args.core_runs = 0

    result = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cpus": os.cpu_count(), "cohortd": args.cohortd, args.socket_key: {}, "core": {"fixed": {}, "scaled": {}}}
    with tempfile.TemporaryDirectory(prefix="growth-") as scratch:
        # Interleaved: each repeat visits every size once, so that the machine's load drifts
        # over all of them alike.
        for rep in range(args.socket_runs):
            for agents in args.socket_agents:
                sample = socket_run(args, agents, scratch, f"cohortd_{agents}_{rep}")
                result[args.socket_key].setdefault(str(agents), []).append(sample)
                print(f"socket x{agents} #{rep}: round {sample['round_ms']:.0f} ms, restart "
                      f"{sample['failure_to_every_round_ms']:.0f} ms, status "
                      f"{sample['status_ms_median']:.1f} ms, daemon CPU {sample['cpu_s']:.2f} s, "
                      f"peak {sample['hwm_kib'] / 1024:.1f} MiB", file=sys.stderr)
    for rep in range(args.core_runs):
        for agents in args.core_agents:
            for scaled in (False, True):
                sample = core_run(args, agents, scaled)
                result["core"]["scaled" if scaled else "fixed"].setdefault(str(agents),
                                                                           []).append(sample)
                print(f"core x{agents} {'scaled' if scaled else 'fixed'} #{rep}: form "
                      f"{sample['form_cpu_ms']:.0f} ms CPU, {sample['waiting_frames']} waiting, "
                      f"restart {sample['restart_cpu_ms']:.0f} ms, status "
                      f"{sample['status_cpu_ms_median']:.1f}/"
                      f"{sample['status_limited_cpu_ms_median']:.1f} ms, RSS +"
                      f"{sample['rss_delta_kib'] / 1024:.0f} MiB", file=sys.stderr)
    result["ended"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print_medians(result, args.socket_key)


def median_of(samples, key):
    values = [s[key] for s in samples if s.get(key, -1) is not None and s.get(key, -1) >= 0]
    return statistics.median(values) if values else float("nan")


def print_medians(result, key):
    print(f"{key} (medians):")
    for agents, samples in result[key].items():
        print(f"  {agents}: round {median_of(samples, 'round_ms'):.0f} ms, complete after "
              f"succeeded {median_of(samples, 'succeeded_to_complete_ms'):.0f} ms, daemon CPU to "
              f"round {median_of(samples, 'daemon_cpu_round_s'):.2f} s, whole run "
              f"{median_of(samples, 'cpu_s'):.2f} s, peak {median_of(samples, 'hwm_kib') / 1024:.1f}"
              f" MiB, heartbeats {median_of(samples, 'heartbeats_ms'):.0f} ms for "
              f"{samples[0]['heartbeats']} (daemon CPU {median_of(samples, 'daemon_cpu_heartbeats_s'):.3f} s),"
              f" restart {median_of(samples, 'failure_to_every_round_ms'):.0f} ms (CPU "
              f"{median_of(samples, 'daemon_cpu_restart_s'):.3f} s), status "
              f"{median_of(samples, 'status_ms_median'):.1f} ms ({samples[0]['status_reply_bytes']}"
              f" bytes), slab +{median_of(samples, 'slab_delta_kib') / 1024:.1f} MiB, waiting "
              f"{median_of(samples, 'waiting_messages'):.0f}")
    for rule in ("fixed", "scaled"):
        print(f"core, {rule} refresh (medians):")
        for agents, samples in result["core"][rule].items():
            print(f"  {agents}: form {median_of(samples, 'form_cpu_ms'):.0f} ms CPU, waiting "
                  f"{median_of(samples, 'waiting_frames'):.0f}, heartbeat "
                  f"{median_of(samples, 'heartbeat_cpu_ns'):.0f} ns, restart "
                  f"{median_of(samples, 'restart_cpu_ms'):.0f} ms, status "
                  f"{median_of(samples, 'status_cpu_ms_median'):.1f} / limited "
                  f"{median_of(samples, 'status_limited_cpu_ms_median'):.1f} ms, RSS +"
                  f"{median_of(samples, 'rss_delta_kib') / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
