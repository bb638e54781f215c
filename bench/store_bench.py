#!/usr/bin/python3
"""Worker store: cohort's TCPStore server side by side with PyTorch's own, under the same load.

Starts, each as its own process, `cohortd --tcpstore-port 0` (cohort's store server) and
`store_bench serve-torch` (LibTorch 1.13 c10d::TCPStore with isServer=true), both on 127.0.0.1,
and measures against EACH in one run:
  - memory per idle connection: server VmRSS before and after `store_bench idle` holds 4096
    connections (on the fresh servers, before any load), divided by 4096;
  - load: `store_bench load` with 1, 16, 64 and 256 LibTorch clients (threads, each its own
    c10d::TCPStore) cycling set/get/add on their own keys: ops/s, p50/p99 latency per op, and
    the server's CPU time per op (from /proc/PID/stat);
  - storm: 4096 raw-socket clients connect, ADD a counter, and all WAIT on the key the last one
    SETs: time until every wait returned.
Each measurement is repeated (--repeats, servers alternating) and the median is reported.

Usage: bench/store_bench.py [--build build] [--seconds 3] [--repeats 3] [--json FILE]
Prints a Markdown table (paste it into docs/BENCHMARKS.md). A benchmark: it asserts no timing.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from proc_stats import (cpu_seconds, fd_count, open_files_limit, raise_nofile, status_kib,
                        wait_for_port_file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = ("cohort", "pytorch")


# `--threads N` and `--store-io` for cohortd when given (main sets them).
COHORTD_THREADS = []














def run_json(argv, timeout):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, preexec_fn=raise_nofile)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Servers:
    """cohortd's plain TCPStore and store_bench serve-torch, each its own process."""

    def __init__(self, build):
        self.dir = tempfile.mkdtemp(prefix="cohort_store_bench_")
        self.processes = {}
        self.ports = {}
        cohort_port_file = os.path.join(self.dir, "cohort.port")
        torch_port_file = os.path.join(self.dir, "torch.port")
        self._start("cohort", [os.path.join(build, "bin", "cohortd"), "--host", "127.0.0.1",
                               "--port", "0", "--tcpstore-port", "0",
                               "--tcpstore-port-file", cohort_port_file] + COHORTD_THREADS, cohort_port_file)
        self._start("pytorch", [os.path.join(build, "bin", "store_bench"), "serve-torch",
                                "--port-file", torch_port_file], torch_port_file)

    def _start(self, name, argv, port_file):
        # The soft descriptor limit is raised to the hard one (cohortd does not raise its own).
        log = open(os.path.join(self.dir, name + ".log"), "w")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=raise_nofile)
        self.processes[name] = process
        self.ports[name] = wait_for_port_file(port_file, process, 30)

    def pid(self, name):
        return self.processes[name].pid

    def stop(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_fd_count(pid, at_least=None, at_most=None, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = fd_count(pid)
        if (at_least is None or count >= at_least) and (at_most is None or count <= at_most):
            return count
        time.sleep(0.05)
    sys.exit(f"server {pid} has {fd_count(pid)} descriptors, wanted >= {at_least} <= {at_most}")


def idle_kib_per_connection(bench, servers, name, clients):
    """VmRSS growth of the server while `clients` idle connections are open, per connection."""
    pid = servers.pid(name)
    base_fds = fd_count(pid)
    time.sleep(0.3)
    before = status_kib(pid, "VmRSS")
    idle = subprocess.Popen([bench, "idle", "--port", str(servers.ports[name]),
                             "--clients", str(clients)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=raise_nofile)
    try:
        line = idle.stdout.readline()
        if not line:
            sys.exit(f"store_bench idle failed: {idle.stderr.read()}")
        wait_fd_count(pid, at_least=base_fds + clients)
        time.sleep(0.5)
        after = status_kib(pid, "VmRSS")
    finally:
        idle.send_signal(signal.SIGTERM)
        idle.wait(timeout=30)
    wait_fd_count(pid, at_most=base_fds)
    return (after - before) / clients, before, after


def load_once(bench, servers, name, clients, seconds, mix):
    pid = servers.pid(name)
    cpu_before = cpu_seconds(pid)
    result = run_json([bench, "load", "--port", str(servers.ports[name]), "--clients",
                       str(clients), "--seconds", str(seconds), "--mix", mix],
                      timeout=seconds + 120)
    # Includes the clients' connects and disconnects (a few per client, negligible per op).
    result["server_cpu_us_per_op"] = (cpu_seconds(pid) - cpu_before) * 1e6 / max(result["ops"], 1)
    return result


def median_of(samples, key):
    return statistics.median(sample[key] for sample in samples)


def machine_description():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        memory_gib = int(f.readline().split()[1]) / 1024 / 1024
    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs ({model}), {memory_gib:.0f} GiB, Linux {os.uname().release}, "
            f"load average {load[0]:.1f} at the start")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", default="1,16,64,256")
    parser.add_argument("--mix", default="set_get_add")
    parser.add_argument("--storm-clients", type=int, default=4096)
    parser.add_argument("--idle-clients", type=int, default=4096)
    parser.add_argument("--json", help="also write every sample to this file")
    parser.add_argument("--from-json", help="only print the table of a --json file of a past run")
    parser.add_argument("--cohortd-threads", type=int, default=0,
                        help="cohortd's --threads (default: its own, one per core)")
    parser.add_argument("--cohortd-store-io", choices=["auto", "io_uring", "epoll"],
                        help="cohortd's --store-io (default: its own, auto)")
    args = parser.parse_args()
    if args.cohortd_threads:
        COHORTD_THREADS.extend(["--threads", str(args.cohortd_threads)])
    if args.cohortd_store_io:
        COHORTD_THREADS.extend(["--store-io", args.cohortd_store_io])
    if args.from_json:
        with open(args.from_json) as f:
            raw = json.load(f)
        print_table(raw)
        return
    bench = os.path.join(args.build, "bin", "store_bench")
    client_counts = [int(c) for c in args.clients.split(",")]
    raise_nofile()
    machine = machine_description()

    servers = Servers(args.build)
    raw = {"machine": machine, "limits": {}, "memory": {}, "load": {}, "storm": {},
           "settings": {"seconds": args.seconds, "repeats": args.repeats, "mix": args.mix,
                        "clients": client_counts, "storm_clients": args.storm_clients,
                        "idle_clients": args.idle_clients}}
    try:
        for name in SERVERS:
            raw["limits"][name] = open_files_limit(servers.pid(name))
        # Memory first, on the fresh servers, so that heap freed by earlier load is not reused.
        for name in SERVERS:
            per, before, after = idle_kib_per_connection(bench, servers, name, args.idle_clients)
            raw["memory"][name] = {"kib_per_connection": per, "rss_before_kib": before,
                                   "rss_after_kib": after}
        for repeat in range(args.repeats):
            order = SERVERS if repeat % 2 == 0 else tuple(reversed(SERVERS))
            for clients in client_counts:
                for name in order:
                    sample = load_once(bench, servers, name, clients, args.seconds, args.mix)
                    raw["load"].setdefault(str(clients), {}).setdefault(name, []).append(sample)
                    print(f"load {name:7} clients={clients:3} ops/s={sample['ops_per_s']:9.0f} "
                          f"p50={sample['p50_us']:8.1f}us p99={sample['p99_us']:9.1f}us "
                          f"server/client cpu per op={sample['server_cpu_us_per_op']:5.1f}/"
                          f"{sample['client_cpu_us_per_op']:5.1f}us", file=sys.stderr)
            for name in order:
                sample = run_json([bench, "storm", "--port", str(servers.ports[name]),
                                   "--clients", str(args.storm_clients), "--timeout", "120"],
                                  timeout=180)
                raw["storm"].setdefault(name, []).append(sample)
                print(f"storm {name:7} total={sample['total_s']:.3f}s "
                      f"connected={sample['connected_s']:.3f}s added={sample['added_s']:.3f}s "
                      f"retries={sample['connect_retries']}", file=sys.stderr)
    finally:
        servers.stop()

    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    print_table(raw)


def paired_ratio(numerators, denominators, key):
    """Median over repeats of numerator/denominator, each pair measured back to back."""
    return statistics.median(n[key] / d[key] for n, d in zip(numerators, denominators))


def print_table(raw):
    settings = raw["settings"]
    print(f"Machine: {raw['machine']}. Medians of {settings['repeats']} runs of "
          f"{settings['seconds']:g} s (ratio: median of the per-run ratios); "
          f"mix {settings['mix']}; descriptor limit cohortd {raw['limits']['cohort']}, "
          f"PyTorch server {raw['limits']['pytorch']}.\n")
    print("| clients | cohort ops/s | PyTorch ops/s | ratio | p50 µs cohort / PyTorch "
          "| p99 µs cohort / PyTorch | server CPU µs/op cohort / PyTorch "
          "| client CPU µs/op with cohort / PyTorch |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for clients in settings["clients"]:
        samples = raw["load"][str(clients)]
        c, t = samples["cohort"], samples["pytorch"]
        c_ops, t_ops = median_of(c, "ops_per_s"), median_of(t, "ops_per_s")
        print(f"| {clients} | {c_ops:,.0f} | {t_ops:,.0f} "
              f"| {paired_ratio(c, t, 'ops_per_s'):.2f}x "
              f"| {median_of(c, 'p50_us'):,.0f} / {median_of(t, 'p50_us'):,.0f} "
              f"| {median_of(c, 'p99_us'):,.0f} / {median_of(t, 'p99_us'):,.0f} "
              f"| {median_of(c, 'server_cpu_us_per_op'):.1f} / "
              f"{median_of(t, 'server_cpu_us_per_op'):.1f} "
              f"| {median_of(c, 'client_cpu_us_per_op'):.1f} / "
              f"{median_of(t, 'client_cpu_us_per_op'):.1f} |")
    print()
    print("| | cohort | PyTorch | ratio |")
    print("|---|---:|---:|---:|")
    c_storm, t_storm = raw["storm"]["cohort"], raw["storm"]["pytorch"]
    print(f"| storm, {settings['storm_clients']} clients (s) "
          f"| {median_of(c_storm, 'total_s'):.3f} | {median_of(t_storm, 'total_s'):.3f} "
          f"| {paired_ratio(t_storm, c_storm, 'total_s'):.1f}x faster |")
    c_mem = raw["memory"]["cohort"]["kib_per_connection"]
    t_mem = raw["memory"]["pytorch"]["kib_per_connection"]
    print(f"| server memory per idle connection (KiB, {settings['idle_clients']} connections) "
          f"| {c_mem:.2f} | {t_mem:.2f} | |")


if __name__ == "__main__":
    main()
