#!/usr/bin/python3
"""Bootstrap storm to the machine's limit: cohort's store server vs PyTorch's, N ranks at once.

For each N (default 1,000, 5,000, 10,000 and 19,000) and each repeat, each server in turn
(alternating order) is started FRESH in its own process on 127.0.0.1, and `bootstrap_storm
--ranks N` (bench/bootstrap_storm.cpp: one process, one Asio thread or --client-threads of them,
each with its own io_context, raw sockets opened and bound before the clock starts) plays N ranks
at NCCL bootstrap, each connecting from its own loopback source address (127.0.1.1 ..
127.0.250.250): rank 0 SETs a 128-byte unique id, every rank ADDs the init counter, WAITs for and
GETs the unique id, then the barrier (ADD a counter, the last to arrive SETs the done key, all WAIT on it). Servers:
  - cohort:  `cohortd --tcpstore-port 0` (1.13 dialect, as PyTorch 1.13 clients speak it);
  - pytorch: LibTorch 1.13's server (`store_bench serve-torch`);
  - pytorch2.6: PyTorch 2.6's non-libuv server (Debian 13's python3-torch, in the root that
    scripts/setup makes, through scripts/in-torch2; 2.x dialect: VALIDATE + PING first). Run only
    up to --torch26-max-ranks ranks (it accepts about 10 connections a second here; see
    docs/BENCHMARKS.md) and --torch26-repeats times;
  - pytorch-libuv: PyTorch 2.x's libuv server (`TCPStore(..., use_libuv=True)`) in --torch-python
    (default: python3 on PATH), for a machine whose PyTorch has libuv, such as a GPU node with
    PyTorch 2.11 (scripts/gpu-check --only store-storm); 2.x dialect. Debian's builds have no
    libuv.
Per run: time until every connect() completed (the client's view: the kernel finished the
handshake), until every rank was done, ranks lost (failed after connect), connect retries,
server peak RSS (VmHWM), server CPU time (utime + stime, from just before the storm to its end),
the listener's highest accept-queue length seen (`ss -ltn` Recv-Q every 0.1 s) and the
machine-wide TCP counters that show an overflowing accept queue (nstat's ListenOverflows,
ListenDrops, TCPSynRetrans, ...; machine-wide: other work on the machine adds to them).

Every run is bounded (--timeout, then the client stops by itself and reports what it reached).
Prints a Markdown table of medians and writes every sample to --json. A benchmark: it asserts
nothing about timing.

Usage: bench/store_storm.py [--build build] [--ranks 1000,5000] [--repeats 3] [--json FILE]
       bench/store_storm.py --from-json A.json [B.json ...]   # merge runs, print the tables
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
import threading
import time

from proc_stats import cpu_seconds, open_files_limit, raise_nofile, status_kib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = ("cohort", "pytorch", "pytorch2.6")  # the default; pytorch-libuv by name
DIALECT = {"cohort": "1.13", "pytorch": "1.13", "pytorch2.6": "2", "pytorch-libuv": "2"}
LABEL = {"cohort": "cohortd", "pytorch": "PyTorch 1.13", "pytorch2.6": "PyTorch 2.6",
         "pytorch-libuv": "PyTorch (libuv)"}
COUNTERS = ("ListenOverflows", "ListenDrops", "TCPReqQFullDrop", "SyncookiesSent",
            "TCPSynRetrans", "TCPBacklogDrop", "RetransSegs", "AttemptFails", "EstabResets")

TORCH_SERVER = """
import os, sys, time
from datetime import timedelta
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=sys.argv[2] == "libuv",
                      multi_tenant=True,
                      wait_for_workers=False, timeout=timedelta(seconds=300))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(store.port))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(3600)
"""


# `--threads N` and `--store-io` for cohortd when given, and the Python that runs
# pytorch-libuv (main sets them).
COHORTD_THREADS = []
TORCH_PYTHON = ["python3"]










def tcp_counters():
    """The machine's TCP counters of COUNTERS (/proc/net/netstat TcpExt and /proc/net/snmp Tcp)."""
    values = {}
    for path in ("/proc/net/netstat", "/proc/net/snmp"):
        with open(path) as f:
            lines = f.read().splitlines()
        for names, numbers in zip(lines[::2], lines[1::2]):
            prefix = names.split(":")[0]
            if prefix not in ("TcpExt", "Tcp"):
                continue
            for name, number in zip(names.split()[1:], numbers.split()[1:]):
                if name in COUNTERS:
                    values[name] = int(number)
    return values


class QueueSampler(threading.Thread):
    """The listeners' Recv-Q (connections waiting in an accept queue) every 0.1 s: the highest of
    any one listener, and how many listen on the port (cohortd: one per io thread)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.highest = 0
        self.backlog = None
        self.listeners = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                out = subprocess.run(["ss", "-ltnH", f"sport = :{self.port}"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, timeout=5).stdout
                self.listeners = max(self.listeners, len(out.splitlines()))
                for line in out.splitlines():
                    fields = line.split()
                    self.highest = max(self.highest, int(fields[1]))
                    self.backlog = int(fields[2])
            except (subprocess.SubprocessError, ValueError, IndexError):
                pass
            except OSError:  # no ss here: the column stays empty
                return
            self.stop.wait(0.1)


class Server:
    """One fresh server process, started for one run."""

    def __init__(self, name, build, scratch):
        self.name = name
        port_file = os.path.join(scratch, name + ".port")
        if os.path.exists(port_file):
            os.remove(port_file)
        if name == "cohort":
            argv = [os.path.join(build, "bin", "cohortd"), "--host", "127.0.0.1", "--port", "0",
                    "--tcpstore-port", "0", "--tcpstore-port-file", port_file] + COHORTD_THREADS
        elif name == "pytorch":
            argv = [os.path.join(build, "bin", "store_bench"), "serve-torch", "--port-file",
                    port_file]
        elif name == "pytorch-libuv":
            argv = TORCH_PYTHON + ["-c", TORCH_SERVER, port_file, "libuv"]
        else:  # in-torch2 execs through to python3: the child's pid is the server's
            argv = [os.path.join(ROOT, "scripts", "in-torch2"), "python3", "-c", TORCH_SERVER,
                    port_file, "legacy"]
        self.log_path = os.path.join(scratch, name + ".log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, preexec_fn=raise_nofile)
        self.pid = self.process.pid
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return
            if self.process.poll() is not None:
                sys.exit(f"{name} exited early with {self.process.returncode}: "
                         f"{open(self.log_path, errors='replace').read()[-2000:]}")
            time.sleep(0.02)
        sys.exit(f"{name}: no port after 120 s")

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def one_run(bench, build, scratch, name, ranks, timeout, one_source, client_threads=1):
    server = Server(name, build, scratch)
    try:
        time.sleep(0.3)  # let it settle after start
        sample = {"server": name, "ranks": ranks, "nofile": open_files_limit(server.pid)}
        sampler = QueueSampler(server.port)
        sampler.start()
        counters_before = tcp_counters()
        cpu_before = cpu_seconds(server.pid)
        sample["server_rss_before_kib"] = status_kib(server.pid, "VmRSS")
        argv = [bench, "--port", str(server.port), "--ranks", str(ranks),
                "--dialect", DIALECT[name], "--timeout", str(timeout)]
        if one_source:
            argv.append("--one-source")
        if client_threads > 1:
            argv += ["--client-threads", str(client_threads)]
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  timeout=timeout + 60, preexec_fn=raise_nofile)
            lines = done.stdout.strip().splitlines()
            if not lines:
                sample.update(complete=False, error=f"client exited {done.returncode}: "
                              f"{done.stderr[-500:]}")
            else:
                sample.update(json.loads(lines[-1]))
        except subprocess.TimeoutExpired:
            sample.update(complete=False, error="client did not stop by itself")
        sample["server_cpu_s"] = cpu_seconds(server.pid) - cpu_before
        sample["server_hwm_kib"] = status_kib(server.pid, "VmHWM")
        sample["server_alive"] = server.alive()
        counters_after = tcp_counters()
        sampler.stop.set()
        sampler.join()
        sample["accept_queue_max"] = sampler.highest
        sample["backlog"] = sampler.backlog
        sample["listeners"] = sampler.listeners
        sample["tcp"] = {k: counters_after.get(k, 0) - counters_before.get(k, 0)
                         for k in COUNTERS}
    finally:
        server.stop()
    return sample


def describe(sample):
    if sample.get("complete"):
        head = (f"done {sample['done_s']:.3f}s connected {sample['connected_s']:.3f}s "
                f"(x{sample['done_s'] / sample['connected_s']:.2f})")
    else:
        head = (f"INCOMPLETE ({sample.get('error') or sample.get('errors')}; connected "
                f"{sample.get('connected')}, done {sample.get('done')})")
    tcp = sample.get("tcp", {})
    return (f"{head} lost {sample.get('lost')} retries {sample.get('connect_retries')} "
            f"cpu {sample.get('server_cpu_s', 0):.2f}s hwm {sample.get('server_hwm_kib')}KiB "
            f"recvq<={sample.get('accept_queue_max')}/{sample.get('backlog')}"
            f"{'' if sample.get('listeners', 1) <= 1 else ' x' + str(sample['listeners'])} "
            f"overflows {tcp.get('ListenOverflows')} synretrans {tcp.get('TCPSynRetrans')}")


def machine_description():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        memory_gib = int(f.readline().split()[1]) / 1024 / 1024
    return f"{os.cpu_count()} CPUs ({model}), {memory_gib:.0f} GiB, Linux {os.uname().release}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", default="1000,5000,10000,19000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--timeout", type=float, default=150, help="seconds per run, at most")
    parser.add_argument("--torch26-max-ranks", type=int, default=1000)
    parser.add_argument("--torch26-repeats", type=int, default=1)
    parser.add_argument("--one-source", action="store_true",
                        help="every rank from 127.0.0.1 (the control for per-address costs)")
    parser.add_argument("--json", help="write every sample to this file")
    parser.add_argument("--from-json", nargs="+", help="merge these runs and print their tables")
    parser.add_argument("--cohortd-threads", type=int, default=0,
                        help="cohortd's --threads (default: its own, one per core)")
    parser.add_argument("--cohortd-store-io", choices=["auto", "io_uring", "epoll"],
                        help="cohortd's --store-io (default: its own, auto)")
    parser.add_argument("--client-threads", type=int, default=1,
                        help="bootstrap_storm's threads (on a machine with many cores, so that "
                             "the client is not the floor)")
    parser.add_argument("--torch-python", default="python3",
                        help="the Python (with a PyTorch that has libuv) for pytorch-libuv")
    args = parser.parse_args()
    if not 1 <= args.client_threads <= 64:
        parser.error("--client-threads: must be 1 to 64")
    if args.cohortd_threads:
        COHORTD_THREADS.extend(["--threads", str(args.cohortd_threads)])
    if args.cohortd_store_io:
        COHORTD_THREADS.extend(["--store-io", args.cohortd_store_io])
    TORCH_PYTHON[:] = [args.torch_python]
    servers = args.servers.split(",")
    unknown = [name for name in servers if name not in DIALECT]
    if unknown:
        parser.error(f"--servers: unknown {', '.join(unknown)} (known: {', '.join(DIALECT)})")
    if args.from_json:
        samples = []
        for batch, path in enumerate(args.from_json):
            with open(path) as f:
                for sample in json.load(f)["samples"]:
                    sample["batch"] = batch  # repeats pair within one file
                    samples.append(sample)
        print_tables(samples)
        return

    raise_nofile()
    bench = os.path.join(args.build, "bin", "bootstrap_storm")
    raw = {"machine": machine_description(), "settings": vars(args), "samples": []}
    scratch = tempfile.mkdtemp(prefix="cohort_store_storm_")
    try:
        for ranks in [int(n) for n in args.ranks.split(",")]:
            for repeat in range(args.repeats):
                order = servers if repeat % 2 == 0 else list(reversed(servers))
                for name in order:
                    if name == "pytorch2.6" and (ranks > args.torch26_max_ranks
                                                 or repeat >= args.torch26_repeats):
                        continue
                    load = os.getloadavg()[0]
                    sample = one_run(bench, args.build, scratch, name, ranks, args.timeout,
                                     args.one_source, args.client_threads)
                    sample["repeat"] = repeat
                    sample["load_before"] = load
                    sample["at"] = time.strftime("%H:%M:%S", time.gmtime())
                    raw["samples"].append(sample)
                    print(f"{sample['at']} N={ranks} {name:10} #{repeat} load {load:.1f}: "
                          f"{describe(sample)}", file=sys.stderr, flush=True)
                    if args.json:  # after every run, so that a cut-short run keeps its samples
                        with open(args.json, "w") as f:
                            json.dump(raw, f, indent=1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"Machine: {raw['machine']}; load average at the end {os.getloadavg()[0]:.1f}.\n")
    print_tables(raw["samples"])


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def print_tables(samples):
    by = {}
    for sample in samples:
        key = (sample["ranks"], sample["server"], bool(sample.get("one_source")))
        by.setdefault(key, []).append(sample)
    print("| ranks | server | complete | connected s | done s | done / connected "
          "| lost, each run "
          "| connect retries | server peak RSS MiB (before) | server CPU s | accept queue max / backlog "
          "| ListenOverflows | TCPSynRetrans |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (ranks, name, one_source), runs in sorted(by.items()):
        done = [r for r in runs if r.get("complete")]
        label = LABEL[name] + (" (one source)" if one_source else "")
        print(f"| {ranks:,} | {label} | {len(done)}/{len(runs)} "
              f"| {fmt(med([r.get('connected_s') for r in runs]), '.3f')} "
              f"| {fmt(med([r['done_s'] for r in done]), '.3f')} "
              f"| {fmt(med([r['done_s'] / r['connected_s'] for r in done]), '.2f')} "
              f"| {', '.join(str(r.get('lost')) for r in runs)} "
              f"| {fmt(med([r.get('connect_retries') for r in runs]), 'g')} "
              f"| {fmt(med([r['server_hwm_kib'] / 1024 for r in runs]), '.1f')} "
              f"({fmt(med([r['server_rss_before_kib'] / 1024 for r in runs]), '.1f')}) "
              f"| {fmt(med([r['server_cpu_s'] for r in runs]), '.2f')} "
              f"| {fmt(med([r['accept_queue_max'] for r in runs]), 'g')} / "
              f"{runs[0].get('backlog')}"
              f"{'' if runs[0].get('listeners', 1) <= 1 else ' x ' + str(runs[0]['listeners'])} "
              f"| {fmt(med([r['tcp']['ListenOverflows'] for r in runs]), 'g')} "
              f"| {fmt(med([r['tcp']['TCPSynRetrans'] for r in runs]), 'g')} |")
    print()
    others = [name for name in DIALECT if name != "cohort"
              and any(sample["server"] == name for sample in samples)]
    print("| ranks | cohortd done s | " + " | ".join(
        f"{LABEL[name]} done s | {LABEL[name]} / cohortd (paired)" for name in others) + " |")
    print("|---:|---:|" + "---:|---:|" * len(others))
    for ranks, one_source in sorted({(s["ranks"], bool(s.get("one_source"))) for s in samples}):
        def runs_of(name):
            return by.get((ranks, name, one_source), [])

        def done_med(name):
            return med([r["done_s"] for r in runs_of(name) if r.get("complete")])

        def paired(name):  # median over repeats of PyTorch's time / cohortd's, same repeat
            def pair(run):
                return run.get("batch", 0), run["repeat"]

            theirs = {pair(r): r for r in runs_of(name) if r.get("complete")}
            ratios = [theirs[pair(r)]["done_s"] / r["done_s"] for r in runs_of("cohort")
                      if r.get("complete") and pair(r) in theirs]
            return med(ratios)

        cells = [f"{fmt(done_med(name), '.3f')} | {fmt(paired(name), '.1f')}x" for name in others]
        print(f"| {ranks:,}{' (one source)' if one_source else ''} "
              f"| {fmt(done_med('cohort'), '.3f')} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
