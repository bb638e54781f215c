#!/usr/bin/python3
"""What stalled strangers cost cohortd: N connections from N loopback addresses, each sending a
frame one byte short of SIZE and then nothing. Prints cohortd's resident memory before and with
them, and how many the daemon closed, and how soon (a 64 KiB frame is the most a connection may
send before its hello; anything larger is refused at once).

    ulimit -n 8192; bench/slow_clients.py build/bin/cohortd [N=2000] [SIZE=65536]
"""
import socket
import struct
import subprocess
import sys
import time

PORT = 29871


def resident_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1])


def stalled(index, frame):
    conn = socket.socket()
    conn.bind((f"127.0.{1 + index // 200}.{10 + index % 200}", 0))
    conn.connect(("127.0.0.1", PORT))
    conn.setblocking(False)
    try:
        conn.send(frame)
    except OSError:
        pass  # refused at accept already
    return conn


def closed_by_daemon(conn, deadline):
    conn.setblocking(True)
    conn.settimeout(max(0.01, deadline - time.time()))
    try:
        while conn.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def main():
    cohortd = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 65536
    daemon = subprocess.Popen([cohortd, "--host", "127.0.0.1", "--port", str(PORT)],
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        print(f"cohortd resident before: {resident_kib(daemon.pid)} KiB")
        frame = struct.pack(">I", size) + b"x" * (size - 1)
        conns = [stalled(i, frame) for i in range(count)]
        start = time.time()
        time.sleep(1)
        print(f"with {count} stalled {size}-byte frames: {resident_kib(daemon.pid)} KiB")
        closed = sum(closed_by_daemon(conn, start + 15) for conn in conns)
        print(f"closed by cohortd: {closed} of {count} within {time.time() - start:.1f} s; "
              f"resident after: {resident_kib(daemon.pid)} KiB")
    finally:
        daemon.kill()


if __name__ == "__main__":
    main()
