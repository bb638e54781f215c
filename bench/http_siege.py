#!/usr/bin/python3
"""GETs to cohortd's HTTP port under a siege of silent connections: ADDRESSES loopback addresses
each holding PER_ADDRESS connections that never send a byte (twice the cap of 64 strangers by
default), reopened every 200 ms once cohortd closes them, as a determined attacker would. Each
GET is its own connection (as Prometheus scrapes); prints how many were answered, closed
unanswered or timed out, and the answered ones' latency (median, p90, max). Without the siege as a
baseline, in the same invocation.

    bench/http_siege.py build/bin/cohortd [GETS=40] [ADDRESSES=64] [PER_ADDRESS=2]
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def start_daemon(cohortd, folder):
    port_file = os.path.join(folder, "http_port")
    daemon = subprocess.Popen([cohortd, "--host", "127.0.0.1", "--port", "0", "--http-port", "0",
                               "--http-port-file", port_file], stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        if os.path.exists(port_file) and open(port_file).read().strip():
            return daemon, int(open(port_file).read())
        time.sleep(0.02)
    daemon.kill()
    sys.exit("cohortd did not write its HTTP port within 10 s")


class Siege:
    """Silent connections kept up by a thread: one cohortd closes is opened again."""

    def __init__(self, port, addresses, per_address):
        self.port = port
        self.held = [(f"127.0.2.{a + 1}", self.open_from(f"127.0.2.{a + 1}"))
                     for a in range(addresses) for _ in range(per_address)]
        self.reopened = 0
        self.stop = False
        self.thread = threading.Thread(target=self.keep_up)
        self.thread.start()

    def open_from(self, source):
        conn = socket.socket()
        conn.setblocking(False)
        conn.bind((source, 0))
        try:
            conn.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        return conn

    @staticmethod
    def closed(conn):
        try:
            while conn.recv(4096):
                pass
            return True
        except (BlockingIOError, OSError) as error:
            return not isinstance(error, BlockingIOError)

    def keep_up(self):
        while not self.stop:
            time.sleep(0.2)
            for index, (source, conn) in enumerate(self.held):
                if self.stop or not self.closed(conn):
                    continue
                conn.close()
                self.held[index] = (source, self.open_from(source))
                self.reopened += 1

    def close(self):
        self.stop = True
        self.thread.join()
        for _, conn in self.held:
            conn.close()


def one_get(port):
    """'ok' and the seconds to the whole answer, or why there was none."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
    except socket.timeout:
        return "timed out", None
    except OSError:
        return "closed", None
    if not answer.startswith(b"HTTP/1.1 200"):
        return "closed", None
    return "ok", time.perf_counter() - started


def measure(port, gets):
    outcomes = {"ok": 0, "closed": 0, "timed out": 0}
    latencies = []
    for _ in range(gets):
        outcome, seconds = one_get(port)
        outcomes[outcome] += 1
        if seconds is not None:
            latencies.append(seconds * 1000)
    return outcomes, latencies


def report(label, outcomes, latencies):
    line = (f"{label}: answered {outcomes['ok']}, closed {outcomes['closed']}, "
            f"timed out {outcomes['timed out']}")
    if latencies:
        latencies.sort()
        p90 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.9))]
        line += (f"; ms median {statistics.median(latencies):.1f}, p90 {p90:.1f}, "
                 f"max {latencies[-1]:.1f}")
    print(line, flush=True)


def main():
    cohortd = sys.argv[1]
    gets = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    addresses = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    per_address = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    with tempfile.TemporaryDirectory() as folder:
        daemon, port = start_daemon(cohortd, folder)
        try:
            report("no siege", *measure(port, gets))
            siege = Siege(port, addresses, per_address)
            time.sleep(0.5)
            try:
                outcomes, latencies = measure(port, gets)
            finally:
                siege.close()
            report(f"{addresses} x {per_address} silent", outcomes, latencies)
            print(f"siege connections reopened after cohortd closed them: {siege.reopened}")
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)


if __name__ == "__main__":
    main()
