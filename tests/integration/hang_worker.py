"""A Python worker for cohort's hang tests (tests/integration/run_hang_test.cpp).

  heartbeat-hang RANK  beats steps 0..4 through the shipped cohort_heartbeat module, then (on the
                       first attempt, on rank RANK only) wedges in wedged_in_allreduce(); the
                       others and later attempts finish. With HANG_WORKER_MARKS=DIR each attempt
                       touches DIR/attempt_<N>.rank<R> (nothing is written without it).
  file-timer           FileTimerClient with expires(after=1) around a 30 s sleep.
  file-timer-crowded   the same, after writing 5,000 scopes for pids that are no worker's.
  silent-first RANK STEP  every rank beats a step each 50 ms; rank RANK stops after step STEP
                       (wedged_in_allreduce), the others 1 s later (waiting_in_allreduce), as
                       ranks blocked in a collective on the wedged one would.
  flight-recorder RANK  like PyTorch's NCCL monitor thread, every rank makes its debug-info pipe
                       (TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe) and, 2 s after something is
                       written to it, writes its dump to TORCH_FR_DUMP_TEMP_FILE<rank> (else
                       TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>) (dump_bytes(rank), in two parts
                       0.2 s apart); every rank beats steps 0..4,
                       then rank RANK wedges and the others go on beating (at most 30 s).
  collective-dumps DIR RANK STEP  silent-first's beats, and each rank makes its debug-info pipe
                       like flight-recorder; 1 s after the pipe is written, it copies DIR/rank<R>.pkl
                       (a dump the test wrote) to its dump file, in two parts 0.2 s apart.
  watchdog-dumps DIR   like PyTorch's watchdog on a collective timeout: each rank beats a few
                       steps, writes DIR/rank<R>.pkl as its dump by itself (no pipe), then fails
                       with the watchdog's error 0.5 s later.
  straggler RANK       every rank beats a step each 50 ms, rank RANK each 250 ms, until the
                       file "stop" appears in the working directory (at most 60 s).
  subprocess-beats FILE  beats once, then starts a Python subprocess, which inherits
                       COHORT_HEARTBEAT_FD but not the pipe (subprocess closes descriptors above
                       2): it puts FILE, with "results" written in it, at that descriptor number
                       and beats; it prints what beat() returned, the worker what FILE then holds.
  odd-steps            prints what beat() returns for steps that are no integer, and for one that
                       is.
"""

import os
import subprocess
import sys
import threading
import time

import cohort_heartbeat


def wedged_in_allreduce():
    time.sleep(3600)


def heartbeat_hang(hung_rank):
    rank = int(os.environ["RANK"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    marks = os.environ.get("HANG_WORKER_MARKS")
    if marks:
        os.makedirs(marks, exist_ok=True)
        open(os.path.join(marks, f"attempt_{attempt}.rank{rank}"), "w").close()
    for step in range(5):
        assert cohort_heartbeat.beat(step), "no heartbeat descriptor"
        time.sleep(0.05)
    if attempt == 0 and rank == hung_rank:
        wedged_in_allreduce()
    # The others wait as a collective would, but never long: a hang test must end.
    time.sleep(0.2)


def waiting_in_allreduce():
    time.sleep(3600)


def silent_first(hung_rank, last_step):
    rank = int(os.environ["RANK"])
    stop_after = last_step if rank == hung_rank else last_step + 20  # 20 steps of 50 ms: 1 s
    for step in range(stop_after + 1):
        cohort_heartbeat.beat(step)
        time.sleep(0.05)
    wedged_in_allreduce() if rank == hung_rank else waiting_in_allreduce()


def dump_bytes(rank):
    return (f"rank {rank} entry\n" * 200).encode()


def wait_for_dump_request(rank):
    pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + f"{rank}.pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    while not os.read(reader, 16):  # b"" (no writer yet) until cohort writes
        time.sleep(0.1)


def write_in_two_parts(rank, dump):
    stem = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    with open(stem + str(rank), "wb") as out:
        out.write(dump[: len(dump) // 2])
        out.flush()
        time.sleep(0.2)
        out.write(dump[len(dump) // 2 :])


def serve_given_dump(rank, directory):
    wait_for_dump_request(rank)
    time.sleep(1)
    with open(os.path.join(directory, f"rank{rank}.pkl"), "rb") as given:
        write_in_two_parts(rank, given.read())


def collective_dumps(directory, hung_rank, last_step):
    rank = int(os.environ["RANK"])
    threading.Thread(target=serve_given_dump, args=(rank, directory), daemon=True).start()
    silent_first(hung_rank, last_step)


def watchdog_dumps(directory):
    rank = int(os.environ["RANK"])
    for step in range(3):
        cohort_heartbeat.beat(step)
        time.sleep(0.05)
    time.sleep(0.5)
    with open(os.path.join(directory, f"rank{rank}.pkl"), "rb") as given:
        write_in_two_parts(rank, given.read())
    time.sleep(0.5)
    sys.exit(f"RuntimeError: [Rank {rank}] Watchdog caught collective operation timeout")


def serve_dump_pipe(rank):
    wait_for_dump_request(rank)
    time.sleep(2)
    dump = dump_bytes(rank)
    stem = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    with open(stem + str(rank), "wb") as out:
        out.write(dump[:1000])
        out.flush()
        time.sleep(0.2)
        out.write(dump[1000:])


def flight_recorder(hung_rank):
    rank = int(os.environ["RANK"])
    threading.Thread(target=serve_dump_pipe, args=(rank,), daemon=True).start()
    started = time.monotonic()
    step = 0
    while time.monotonic() - started < 30:
        cohort_heartbeat.beat(step)
        time.sleep(0.05)
        step += 1
        if step == 5 and rank == hung_rank:
            wedged_in_allreduce()


def straggler(slow_rank):
    rank = int(os.environ["RANK"])
    started = time.monotonic()
    step = 0
    while not os.path.exists("stop") and time.monotonic() - started < 60:
        cohort_heartbeat.beat(step)
        time.sleep(0.25 if rank == slow_rank else 0.05)
        step += 1


SUBPROCESS_BEATS = r"""
import os, sys, cohort_heartbeat
fd = int(os.environ["COHORT_HEARTBEAT_FD"])
os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
os.write(fd, b"results\n")
print("subprocess: beat(7) returned", cohort_heartbeat.beat(7), flush=True)
"""


def subprocess_beats(path):
    assert cohort_heartbeat.beat(0), "no heartbeat descriptor"
    subprocess.run([sys.executable, "-c", SUBPROCESS_BEATS, path], check=True)
    with open(path) as results:
        print(f"{path} holds {results.read()!r}", flush=True)


def odd_steps():
    for step in ("epoch-1", float("nan"), float("inf"), [3], 5):
        print(f"beat({step!r}) returned {cohort_heartbeat.beat(step)}", flush=True)


def file_timer():
    import torch.distributed.elastic.timer as timer

    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    open("timer_set", "w").write(str(time.time()))
    with timer.expires(after=1, scope="long_sleep"):
        time.sleep(30)
    print("the timer did not fire", flush=True)


def file_timer_crowded():
    import json

    with open(os.environ["TORCHELASTIC_TIMER_FILE"], "w") as pipe:
        for i in range(5000):  # more than the agent holds at once, none of them a worker's
            request = {"version": 1, "pid": 4000000 + i, "scope_id": "foreign%d" % i,
                       "expiration_time": time.time() + 3600, "signal": 9}
            pipe.write(json.dumps(request) + "\n")
    file_timer()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "heartbeat-hang":
        heartbeat_hang(int(sys.argv[2]))
    elif mode == "file-timer":
        file_timer()
    elif mode == "file-timer-crowded":
        file_timer_crowded()
    elif mode == "silent-first":
        silent_first(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "flight-recorder":
        flight_recorder(int(sys.argv[2]))
    elif mode == "collective-dumps":
        collective_dumps(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "watchdog-dumps":
        watchdog_dumps(sys.argv[2])
    elif mode == "straggler":
        straggler(int(sys.argv[2]))
    elif mode == "subprocess-beats":
        subprocess_beats(sys.argv[2])
    elif mode == "odd-steps":
        odd_steps()
    else:
        sys.exit(f"unknown mode {mode}")
