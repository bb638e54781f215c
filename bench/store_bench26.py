#!/usr/bin/python3
"""Worker store vs PyTorch 2.6's TCPStore server, under the same PyTorch 2.6 client load.

Runs inside the PyTorch 2.6 root (Debian 13's python3-torch, which scripts/setup makes):

    scripts/in-torch2 python3 bench/store_bench26.py [--build build] [--seconds 3] [--repeats 3]

Starts, each as its own process on 127.0.0.1: `cohortd --tcpstore-port 0` (cohort's store server)
and PyTorch 2.6's own server (`TCPStore(is_master=True, use_libuv=False, multi_tenant=True)`: the
backend Debian's build has, libuv being absent), and measures against EACH in one run:
  - memory per idle connection: server VmRSS before and after 4096 raw connections that each
    did the 2.x handshake (VALIDATE, PING), on the fresh servers, divided by 4096;
  - load: 1, 16 and 64 PyTorch 2.6 clients (torch.distributed.TCPStore, is_master=False,
    use_libuv=False; 8 processes at most, the rest as threads in them) cycling set / get / add
    on their own keys: ops/s, p50 / p99 per op, server CPU per op (/proc/PID/stat);
  - storm: 4096 raw-socket clients speaking the 2.x protocol (one asyncio thread) connect,
    VALIDATE + PING, ADD a counter, and all WAIT on the key that the one whose ADD returned 4096
    SETs: time from the first connect until every wait returned.
Each measurement is repeated (--repeats, servers alternating); medians are reported, and each
ratio is the median of the per-repeat ratios. A load run whose client process dies (PyTorch 2.6's
Python client on Python 3.13 sometimes aborts in pybind11 at 64 clients, against either server)
is reported and left out; the table says how many runs completed. A benchmark: it asserts no
timing.
STORE_BENCH_TRACE=SECONDS: print every thread's stack and exit if the run takes longer.

--libuv: PyTorch's libuv server and clients instead (builds that have libuv, e.g. PyTorch 2.11 on
a GPU node; run there with its own python3, no root needed). --cohortd-threads N: cohortd's
--threads.

The LibTorch load generator of bench/store_bench.py speaks the 1.13 protocol, which 2.6's server
does not; hence this Python one. Both servers get exactly the same client work, but the clients'
Python overhead shares the same cores, so absolute ops/s are lower than store_bench.py's.
"""
import argparse
import asyncio
import multiprocessing
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta

from proc_stats import TICKS, cpu_ticks, raise_nofile, status_kib, stop, wait_for_port_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = ("cohort", "pytorch 2.6")
MAX_PROCESSES = 8

TORCH_SERVER = """
import sys, time
import torch.distributed as dist
from datetime import timedelta
store = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=LIBUV, multi_tenant=True,
                      wait_for_workers=False, timeout=timedelta(seconds=300))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(store.port))
import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(3600)
"""


# `--threads N` and `--store-io` for cohortd when given (main sets them).
COHORTD_THREADS = []
# PyTorch's libuv server and clients (--libuv); a list, so that main can set it in place.
LIBUV = [False]




def start_server(name, build, scratch):
    port_file = os.path.join(scratch, name.replace(" ", "_") + ".port")
    if name == "cohort":
        argv = [os.path.join(build, "bin", "cohortd"), "--host", "127.0.0.1", "--port", "0",
                "--tcpstore-port", "0", "--tcpstore-port-file", port_file] + COHORTD_THREADS
    else:
        argv = [sys.executable, "-c", TORCH_SERVER.replace("LIBUV", str(LIBUV[0])), port_file]
    log = open(os.path.join(scratch, name.replace(" ", "_") + ".log"), "wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=raise_nofile)
    proc.log_path = log.name
    log.close()
    return proc, wait_for_port_file(port_file, proc, 120, f"{name} server")






# --- raw 2.x protocol (VALIDATE era: docs in the tcpstore-protocol notes) --------------------

VALIDATE = b"\x00" + struct.pack("<I", 0x3C85F7CE)


def key_bytes(key):
    raw = key.encode()
    return struct.pack("<Q", len(raw)) + raw


async def handshake(reader, writer):
    writer.write(VALIDATE + b"\x0d" + struct.pack("<I", os.getpid()))
    await writer.drain()
    echo = await reader.readexactly(4)
    assert struct.unpack("<I", echo)[0] == os.getpid(), "bad PING echo"


async def storm_client(port, tag, total, done_times, start):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    await handshake(reader, writer)
    counter = f"/{tag}/init/"
    go = f"/{tag}/go"
    writer.write(b"\x04" + key_bytes(counter) + struct.pack("<q", 1))
    await writer.drain()
    (value,) = struct.unpack("<q", await reader.readexactly(8))
    if value == total:  # the last to arrive sets the key (and its own WAIT returns at once)
        writer.write(b"\x01" + key_bytes(go) + struct.pack("<Q", 1) + b"1")
    writer.write(b"\x06" + struct.pack("<Q", 1) + key_bytes(go))
    await writer.drain()
    reply = await reader.readexactly(1)
    assert reply == b"\x00", reply
    done_times.append(time.monotonic() - start)
    return writer


async def storm_async(port, clients, tag):
    done_times = []
    start = time.monotonic()
    writers = await asyncio.gather(*(storm_client(port, tag, clients, done_times, start)
                                     for _ in range(clients)))
    elapsed = time.monotonic() - start
    for writer in writers:
        writer.close()
    return elapsed


async def idle_async(port, clients):
    conns = []
    for _ in range(clients):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await handshake(reader, writer)
        conns.append(writer)
    return conns


def measure_idle(pid, port, clients):
    loop = asyncio.new_event_loop()
    before = status_kib(pid, "VmRSS")
    conns = loop.run_until_complete(idle_async(port, clients))
    time.sleep(0.5)
    after = status_kib(pid, "VmRSS")
    for writer in conns:
        writer.close()
    loop.run_until_complete(asyncio.sleep(0.2))
    loop.close()
    return (after - before) / clients


# --- load: PyTorch 2.6 clients -------------------------------------------------------------


def load_process(port, threads, seconds, first_id, out):
    import torch.distributed as dist

    results = [None] * threads
    barrier = threading.Barrier(threads)

    def one(index):
        try:
            results[index] = cycle(index)
        except Exception as error:  # noqa: BLE001  (reported to the driver, which stops)
            results[index] = f"client {first_id + index}: {error}"

    def cycle(index):
        store = dist.TCPStore("127.0.0.1", port, is_master=False, use_libuv=LIBUV[0],
                              timeout=timedelta(seconds=120))
        key = f"client{first_id + index}"
        value = b"x" * 64
        lat = {"set": [], "get": [], "add": []}
        barrier.wait()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter_ns()
            store.set(key, value)
            t1 = time.perf_counter_ns()
            store.get(key)
            t2 = time.perf_counter_ns()
            store.add(key + "/n", 1)
            t3 = time.perf_counter_ns()
            lat["set"].append(t1 - t0)
            lat["get"].append(t2 - t1)
            lat["add"].append(t3 - t2)
        return lat

    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    errors = [lat for lat in results if isinstance(lat, str)]
    if errors:
        out.send("; ".join(errors))
        out.close()
        return
    merged = {"set": [], "get": [], "add": []}
    for lat in results:
        for op in merged:
            merged[op].extend(lat[op])
    out.send(merged)
    out.close()


def measure_load(server, port, clients, seconds):
    pid = server.pid
    processes = min(clients, MAX_PROCESSES)
    per = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    context = multiprocessing.get_context("fork")
    pipes, procs = [], []
    first = 0
    for threads in per:
        parent, child = context.Pipe(duplex=False)
        proc = context.Process(target=load_process, args=(port, threads, seconds, first, child))
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
        first += threads
    # The clients connect and import before the timed part: server CPU is read around it.
    time.sleep(0.5)
    ticks_before = cpu_ticks(pid)
    merged = {"set": [], "get": [], "add": []}
    failure = None
    for parent in pipes:
        try:
            part = parent.recv()
        except EOFError:  # the client process died without a word (e.g. aborted in pybind11)
            part = "a client process ended without reporting"
        if isinstance(part, str):
            failure = failure or part
            continue
        for op in merged:
            merged[op].extend(part[op])
    ticks_after = cpu_ticks(pid)
    for proc in procs:
        proc.join()
    if failure is not None:
        exit_codes = sorted({proc.exitcode for proc in procs if proc.exitcode})
        if server.poll() is not None:  # the server itself died: nothing later can be measured
            with open(server.log_path, errors="replace") as f:
                log = f.read()[-3000:]
            sys.exit(f"load of {clients} clients failed: {failure}\nthe server exited with "
                     f"{server.returncode}; its log:\n{log}")
        return {"failed": f"{failure} (client exit codes {exit_codes})"}
    every = merged["set"] + merged["get"] + merged["add"]
    every.sort()
    ops = len(every)
    per_op = lambda ticks: ticks / TICKS * 1e6 / max(ops, 1)  # noqa: E731
    user, system = (after - before for after, before in zip(ticks_after, ticks_before))
    quantile = lambda q: every[min(len(every) - 1, int(q * len(every)))] / 1000  # noqa: E731
    return {
        "ops_s": ops / seconds,
        "p50_us": quantile(0.50),
        "p99_us": quantile(0.99),
        "server_cpu_us_per_op": per_op(user + system),
        "server_user_us_per_op": per_op(user),
        "server_system_us_per_op": per_op(system),
    }


def main():
    if os.environ.get("STORE_BENCH_TRACE"):
        import faulthandler
        faulthandler.dump_traceback_later(float(os.environ["STORE_BENCH_TRACE"]), exit=True)
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", default="1,16,64")
    parser.add_argument("--storm", type=int, default=4096)
    parser.add_argument("--libuv", action="store_true",
                        help="PyTorch's libuv server and clients (where the build has libuv)")
    parser.add_argument("--cohortd-threads", type=int, default=0,
                        help="cohortd's --threads (default: its own, one per core)")
    parser.add_argument("--cohortd-store-io", choices=["auto", "io_uring", "epoll"],
                        help="cohortd's --store-io (default: its own, auto)")
    args = parser.parse_args()
    if args.cohortd_threads:
        COHORTD_THREADS.extend(["--threads", str(args.cohortd_threads)])
    if args.cohortd_store_io:
        COHORTD_THREADS.extend(["--store-io", args.cohortd_store_io])
    LIBUV[0] = args.libuv
    raise_nofile()
    import torch

    clients_list = [int(n) for n in args.clients.split(",")]
    scratch = tempfile.mkdtemp(prefix="cohort_store_bench26_")
    servers = {name: start_server(name, os.path.abspath(args.build), scratch) for name in SERVERS}
    results = {name: {"idle": [], "storm": [], "load": {n: [] for n in clients_list}}
               for name in SERVERS}
    try:
        for name, (proc, port) in servers.items():
            results[name]["idle"].append(measure_idle(proc.pid, port, args.storm))
            print(f"{name}: idle {results[name]['idle'][-1]:.2f} KiB/conn", file=sys.stderr)
        for repeat in range(args.repeats):
            order = SERVERS if repeat % 2 == 0 else tuple(reversed(SERVERS))
            for clients in clients_list:
                for name in order:
                    proc, port = servers[name]
                    sample = measure_load(proc, port, clients, args.seconds)
                    results[name]["load"][clients].append(sample)
                    print(f"{name} x{clients}: {sample}", file=sys.stderr)
            for name in order:
                proc, port = servers[name]
                elapsed = asyncio.run(storm_async(port, args.storm, f"storm{repeat}"))
                results[name]["storm"].append(elapsed)
                print(f"{name} storm: {elapsed:.3f} s", file=sys.stderr)
    finally:
        for proc, _ in servers.values():
            stop(proc)

    shutil.rmtree(scratch, ignore_errors=True)  # kept when a load failed: the servers' logs
    med = statistics.median
    cohort, theirs = results["cohort"], results["pytorch 2.6"]
    print("| clients | cohort ops/s | PyTorch 2.6 ops/s | ratio | p50 µs cohort / 2.6 | "
          "p99 µs cohort / 2.6 | server CPU µs/op cohort / 2.6 | of which in the kernel | "
          "runs completed cohort / 2.6 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for clients in clients_list:
        c, t = cohort["load"][clients], theirs["load"][clients]
        pairs = [(a, b) for a, b in zip(c, t) if "failed" not in a and "failed" not in b]
        c, t = [r for r in c if "failed" not in r], [r for r in t if "failed" not in r]
        if not c or not t:
            print(f"| {clients} | no completed run of " + ("cohort" if not c else "2.6") +
                  f" | | | | | | | {len(c)} / {len(t)} |")
            continue
        ratio = med([a["ops_s"] / b["ops_s"] for a, b in pairs]) if pairs else float("nan")
        pick = lambda runs, field: med([r[field] for r in runs])  # noqa: E731
        print(f"| {clients} | {pick(c, 'ops_s'):,.0f} | {pick(t, 'ops_s'):,.0f} | {ratio:.2f}x | "
              f"{pick(c, 'p50_us'):,.0f} / {pick(t, 'p50_us'):,.0f} | "
              f"{pick(c, 'p99_us'):,.0f} / {pick(t, 'p99_us'):,.0f} | "
              f"{pick(c, 'server_cpu_us_per_op'):.1f} / {pick(t, 'server_cpu_us_per_op'):.1f} | "
              f"{pick(c, 'server_system_us_per_op'):.1f} / "
              f"{pick(t, 'server_system_us_per_op'):.1f} | {len(c)} / {len(t)} |")
    print()
    storm_ratio = med([b / a for a, b in zip(cohort["storm"], theirs["storm"])])
    print("| | cohort | PyTorch 2.6 | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| storm, {args.storm} clients (s) | {med(cohort['storm']):.3f} | "
          f"{med(theirs['storm']):.3f} | {storm_ratio:.1f}x faster |")
    print(f"| server memory per idle connection (KiB, {args.storm} connections) | "
          f"{med(cohort['idle']):.2f} | {med(theirs['idle']):.2f} | |")
    print()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"torch {torch.__version__}; {args.repeats} repeats of {args.seconds:g} s; "
          f"{os.cpu_count()} CPUs; load average at the end {os.getloadavg()[0]:.1f}; "
          f"descriptor limit {soft}/{hard}")


if __name__ == "__main__":
    main()
