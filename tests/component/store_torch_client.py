"""Real PyTorch clients against cohort's worker store (used by store_server_test.cpp).

  store_torch_client.py ops HOST PORT    torch.distributed.TCPStore operations, checked (plus
                                         the 2.x-only ones when the client has them)
  store_torch_client.py gloo             init_process_group("gloo") in agent-store mode from the
                                         torchrun environment (RANK, WORLD_SIZE, MASTER_*), then
                                         collectives

Prints "store_torch_client: ok" and exits 0 when every answer is right; exits non-zero
(AssertionError or the client's own exception) otherwise.
"""
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def expect_timeout(action, what):
    started = time.monotonic()
    try:
        action()
    except RuntimeError as error:  # 1.13: "Socket Timeout"; 2.x: DistStoreError (a RuntimeError)
        print(f"{what}: timed out as expected after {time.monotonic() - started:.2f}s: {error}")
        return
    raise AssertionError(f"{what}: no timeout")


def ops(host, port):
    store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=20))
    store.set("k1", "v1")
    assert store.get("k1") == b"v1"
    assert store.add("cnt", 5) == 5
    assert store.add("cnt", -2) == 3
    assert store.compare_set("cs", "", "first") == b"first"
    assert store.compare_set("cs", "wrong", "x") == b"first"
    assert store.compare_set("cs", "first", "second") == b"second"
    assert store.compare_set("absent", "exp", "d") == b"exp"  # absent + expected: returns expected
    store.wait(["k1", "cnt"])
    store.wait(["k1"], timedelta(seconds=2))

    # A wait that times out, followed by more requests on the same store object: the server
    # must not send a stray reply later (1.13 keeps the short socket timeout from now on).
    expect_timeout(lambda: store.wait(["never"], timedelta(milliseconds=300)), "wait")
    store.set("never", "now")
    assert store.get("k1") == b"v1"
    assert store.add("cnt", 0) == 3
    assert store.get("never") == b"now"
    # The same through get() of a missing key (WAIT + GET) with a short store timeout.
    store.set_timeout(timedelta(milliseconds=300))
    expect_timeout(lambda: store.get("absent"), "get")
    store.set_timeout(timedelta(seconds=20))
    assert store.get("cs") == b"second"

    # A second client (two connections, ADD init/) wakes a wait of the first.
    other = dist.TCPStore(host, port, world_size=2, is_master=False,
                          timeout=timedelta(seconds=20))
    woke = []
    waiter = threading.Thread(target=lambda: (store.wait(["late"]), woke.append(True)))
    waiter.start()
    time.sleep(0.2)
    other.set("late", "x")
    waiter.join(timeout=10)
    assert woke == [True], "wait was not woken by another client's set"
    assert store.get("late") == b"x"

    prefixed = dist.PrefixStore("/worker/attempt_3", store)
    prefixed.set("x", "1")
    assert store.get("/worker/attempt_3/x") == b"1"

    assert store.delete_key("k1")
    assert not store.delete_key("k1")
    # init/, /cnt, /cs, /never, /late, //worker/attempt_3/x
    assert store.num_keys() == 6, store.num_keys()
    newer_ops(store)
    print("store_torch_client: ok")


def newer_ops(store):
    """Operations that only 2.x clients have (VALIDATE-era protocol); skipped on 1.13."""
    if hasattr(store, "multi_set"):
        store.multi_set(["m1", "m2"], ["a", "b"])
        assert store.multi_get(["m2", "m1"]) == [b"b", b"a"]
        store.append("m1", "+")
        assert store.get("m1") == b"a+"
        print("2.x multi_set/multi_get/append: ok")
    if hasattr(store, "list_keys"):
        assert "m1" in store.list_keys(), store.list_keys()
        print("2.x list_keys: ok")


def gloo():
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([rank + 1.0])
    dist.all_reduce(value)
    assert value.item() == world * (world + 1) / 2, value
    group = dist.new_group(list(range(world)))
    dist.barrier(group)
    dist.destroy_process_group()
    print(f"store_torch_client: ok rank={rank}")


if __name__ == "__main__":
    if sys.argv[1] == "ops":
        ops(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "gloo":
        gloo()
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
