#!/usr/bin/env python3
"""A relay between a tool and a cohort daemon that changes the daemon's answers on the way.

Listens on 127.0.0.1 (an ephemeral port, written to the file argv[6]), forwards each
connection to the daemon at argv[1]:argv[2], and in the daemon's bytes swaps each argv[3] for
argv[4] (of equal length, so that every frame's length still holds). Used by the integration
tests to show that a tool with a token refuses an answer changed in flight. Stops by itself
after argv[5] s.
"""
import os
import socket
import sys
import threading
import time


def pump(source, sink, old, new):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data.replace(old, new) if old else data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client, daemon_host, daemon_port, old, new):
    daemon = socket.create_connection((daemon_host, daemon_port), timeout=5)
    daemon.settimeout(None)
    threading.Thread(target=pump, args=(client, daemon, b"", b""), daemon=True).start()
    threading.Thread(target=pump, args=(daemon, client, old, new), daemon=True).start()


def main():
    daemon_port, old, new, lifetime = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    assert len(old) == len(new), "the swap must keep each frame's length"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    with open(sys.argv[6] + ".tmp", "w") as port_file:
        port_file.write(str(listener.getsockname()[1]))
    os.rename(sys.argv[6] + ".tmp", sys.argv[6])
    end = time.monotonic() + float(lifetime)
    while time.monotonic() < end:
        try:
            client, _ = listener.accept()
        except socket.timeout:
            continue
        serve(client, sys.argv[1], daemon_port, old.encode(), new.encode())


if __name__ == "__main__":
    main()
