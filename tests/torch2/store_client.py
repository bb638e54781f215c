"""PyTorch 2.6's own TCPStore client against a store: every operation the client has, checked.

  store_client.py ops HOST PORT     against the store at HOST:PORT (cohortd --tcpstore-port)
  store_client.py ops-env           against MASTER_ADDR:MASTER_PORT (a worker of `cohort run`:
                                    the round's worker store)
  store_client.py ops-reference     against PyTorch 2.6's own server (use_libuv=False, the backend
                                    Debian's build has), started here: proves the expectations

Every client is made with is_master=False and use_libuv=False, and speaks the 2.x protocol
(VALIDATE, PING, CANCEL_WAIT, MULTI_GET/MULTI_SET, APPEND; docs: tcpstore-protocol). The store
must be fresh (no key). Prints one line per group of operations and "store_client: ok torch=<v>"
at the end; exits non-zero (AssertionError or the client's own exception) on the first wrong
answer.
"""
import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

TIMEOUT = timedelta(seconds=30)
# Operations of later PyTorch releases: tested when the client has them, named when it has not.
LATER_OPS = ("queue_push", "queue_pop", "queue_len", "list_keys")


def client(host, port, **kwargs):
    store = dist.TCPStore(host, port, is_master=False, use_libuv=False, timeout=TIMEOUT, **kwargs)
    assert store.libuvBackend is False
    return store


def expect_timeout(action, what, seconds):
    started = time.monotonic()
    try:
        action()
    except dist.DistStoreError as error:  # 2.x: the client cancels its wait (CANCEL_WAIT)
        elapsed = time.monotonic() - started
        assert elapsed >= seconds * 0.9, f"{what}: timed out after {elapsed:.2f}s, too early"
        print(f"{what}: timed out as expected after {elapsed:.2f}s: {error}")
        return
    raise AssertionError(f"{what}: no timeout")


def woken_by(waiter_store, keys, write):
    """True when `write` wakes a wait on `keys` blocked in `waiter_store` (and not before)."""
    woke = []
    waiter = threading.Thread(target=lambda: (waiter_store.wait(keys), woke.append(True)))
    waiter.start()
    time.sleep(0.3)
    assert not woke, f"wait on {keys} returned before the write"
    write()
    waiter.join(timeout=20)
    return woke == [True]


def ops(host, port):
    store = client(host, port)
    assert store.has_extended_api()
    assert store.num_keys() == 0, f"not a fresh store: {store.num_keys()} keys"

    # set / get, with values that are not text, empty and large (4 MiB).
    store.set("k1", "v1")
    assert store.get("k1") == b"v1"
    binary = bytes(range(256)) * 4
    store.set("bin", binary)
    assert store.get("bin") == binary
    store.set("empty", "")
    assert store.get("empty") == b""
    big = os.urandom(4 << 20)
    store.set("big", big)
    assert store.get("big") == big
    store.set("k1", "v1 again")
    assert store.get("k1") == b"v1 again"
    print("set/get: ok")

    # add: an absent key starts at the delta; add 0 reads the counter.
    assert store.add("cnt", 5) == 5
    assert store.add("cnt", -2) == 3
    assert store.add("cnt", 0) == 3
    assert store.get("cnt") == b"3"
    print("add: ok")

    # compare_set: absent + empty expected stores; a mismatch answers the current value; an
    # absent key with a non-empty expected value answers that value and stores nothing.
    assert store.compare_set("cs", "", "first") == b"first"
    assert store.compare_set("cs", "wrong", "x") == b"first"
    assert store.compare_set("cs", "first", "second") == b"second"
    assert store.compare_set("absent", "exp", "d") == b"exp"
    assert not store.check(["absent"])
    print("compare_set: ok")

    # check: never blocks.
    assert store.check(["k1", "cnt"])
    assert not store.check(["k1", "nope"])
    assert store.check([])
    print("check: ok")

    # wait: present keys return at once, with and without a timeout.
    store.wait(["k1", "cnt"])
    store.wait(["k1"], timedelta(seconds=2))
    store.wait([])

    # A wait that times out (the client sends CANCEL_WAIT), then more requests on the same
    # connection: every answer must still be the right one (no stray wake-up reply later).
    expect_timeout(lambda: store.wait(["never"], timedelta(milliseconds=300)), "wait", 0.3)
    store.set("never", "now")
    assert store.get("k1") == b"v1 again"
    assert store.add("cnt", 0) == 3
    assert store.get("never") == b"now"
    expect_timeout(lambda: store.wait(["never", "later"], timedelta(milliseconds=300)),
                   "wait on two keys, one there", 0.3)
    store.set("later", "x")
    store.wait(["never", "later"], timedelta(seconds=5))
    # The same through get() of a missing key (WAIT + GET) with a short store timeout.
    store.set_timeout(timedelta(milliseconds=300))
    assert store.timeout == timedelta(milliseconds=300)
    expect_timeout(lambda: store.get("absent"), "get", 0.3)
    store.set_timeout(TIMEOUT)
    assert store.get("cs") == b"second"
    print("wait and timeouts: ok")

    # A second client, made with world_size=2 (its constructor adds to the raw key "init/"),
    # wakes a wait of the first with each kind of write.
    other = client(host, port, world_size=2)
    assert woken_by(store, ["late_set"], lambda: other.set("late_set", "x"))
    assert woken_by(store, ["late_add"], lambda: other.add("late_add", 1))
    assert woken_by(store, ["late_append"], lambda: other.append("late_append", "y"))
    assert woken_by(store, ["late_multi"],
                    lambda: other.multi_set(["late_multi", "late_multi2"], ["m", "n"]))
    assert store.get("late_set") == b"x"
    assert store.get("late_multi2") == b"n"
    # A wait on two keys returns once both are written (one now, one later).
    def one_then_other():
        other.set("both1", "1")
        time.sleep(0.3)
        assert not other.check(["both2"])
        other.set("both2", "2")

    assert woken_by(store, ["both1", "both2"], one_then_other)
    print("wake-ups from another client: ok")

    # multi_set / multi_get (in request order; multi_get waits for every key).
    store.multi_set(["m1", "m2", "m3"], ["a", "b", b"\x00c"])
    assert store.multi_get(["m3", "m1", "m2"]) == [b"\x00c", b"a", b"b"]
    fetched = []
    getter = threading.Thread(target=lambda: fetched.append(store.multi_get(["m1", "m_late"])))
    getter.start()
    time.sleep(0.3)
    assert not fetched, "multi_get returned before its last key was written"
    other.set("m_late", "z")
    getter.join(timeout=20)
    assert fetched == [[b"a", b"z"]], fetched
    print("multi_set/multi_get: ok")

    # append: to a present key, and to an absent one (creates it).
    store.append("m1", "+")
    store.append("m1", b"\x01")
    assert store.get("m1") == b"a+\x01"
    store.append("new_app", "start")
    assert store.get("new_app") == b"start"
    print("append: ok")

    # PrefixStore, nested: keys are "<outer>/<inner>/key" on the wire.
    prefixed = dist.PrefixStore("outer", dist.PrefixStore("inner", store))
    prefixed.set("x", "1")
    assert store.get("inner/outer/x") == b"1"
    assert prefixed.add("n", 2) == 2
    print("prefix store: ok")

    # delete_key: removes, answers whether it did.
    assert store.delete_key("k1")
    assert not store.delete_key("k1")
    assert not store.check(["k1"])
    print("delete_key: ok")

    # Many clients at once, each adding to one counter.
    def adder():
        own = client(host, port)
        for _ in range(50):
            own.add("shared", 1)

    threads = [threading.Thread(target=adder) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert store.add("shared", 0) == 400
    print("8 concurrent clients: ok")

    # num_keys counts every key of the store, the raw "init/" too:
    expected = {"bin", "empty", "big", "cnt", "cs", "never", "later", "init/", "late_set",
                "late_add", "late_append", "late_multi", "late_multi2", "both1", "both2", "m1",
                "m2", "m3", "m_late", "new_app", "inner/outer/x", "inner/outer/n", "shared"}
    assert store.num_keys() == len(expected), (store.num_keys(), len(expected))
    print(f"num_keys: ok ({len(expected)})")

    missing = [name for name in LATER_OPS if not hasattr(store, name)]
    if missing:
        print(f"not in PyTorch {torch.__version__}: {' '.join(missing)}")
    print(f"store_client: ok torch={torch.__version__}")


def reference():
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=False, timeout=TIMEOUT,
                           wait_for_workers=False)
    ops("127.0.0.1", server.port)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "ops":
        ops(sys.argv[2], int(sys.argv[3]))
    elif mode == "ops-env":
        ops(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    elif mode == "ops-reference":
        reference()
    else:
        sys.exit(f"unknown mode {mode}")
