"""Opens many connections to the run's worker store and keeps them all open until every worker
of the run has opened its own, so that the store holds WORLD_SIZE * COUNT connections at once.

Usage: store_many_connections.py EXPECTED_SOFT_LIMIT COUNT. Exits 3 when this worker's soft
open-file limit is not EXPECTED_SOFT_LIMIT (the limit the user gave cohort), 1 on a store timeout.
Speaks the 1.13 wire format (ADD is type 3: u64 key length, key, i64 delta; the reply is an i64).
"""
import os
import resource
import socket
import struct
import sys
import time

KEY = b"connections"


def add(sock, delta):
    sock.sendall(struct.pack("<BQ", 3, len(KEY)) + KEY + struct.pack("<q", delta))
    reply = b""
    while len(reply) < 8:
        chunk = sock.recv(8 - len(reply))
        if not chunk:
            sys.exit("the store closed a connection")
        reply += chunk
    return struct.unpack("<q", reply)[0]


expected_soft, count = int(sys.argv[1]), int(sys.argv[2])
soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
if soft != expected_soft:
    print(f"worker soft open-file limit {soft}, expected {expected_soft}", flush=True)
    sys.exit(3)
address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
total = int(os.environ["WORLD_SIZE"]) * count
sockets = [socket.create_connection(address, timeout=20) for _ in range(count)]
for sock in sockets:
    add(sock, 1)
deadline = time.monotonic() + 20
while add(sockets[0], 0) < total:
    if time.monotonic() > deadline:
        sys.exit("not every worker's connections were counted")
    time.sleep(0.01)
print(f"rank {os.environ['RANK']}: {count} connections of {total} answered", flush=True)
