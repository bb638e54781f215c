"""A Python worker for cohort's hang tests (tests/integration/run_hang_test.cpp).

  heartbeat-hang RANK  beats steps 0..4 through the shipped cohort_heartbeat module, then (on the
                       first attempt, on rank RANK only) wedges in wedged_in_allreduce(); the
                       others and later attempts finish. Each attempt touches attempt_<N>.rank<R>.
  file-timer           FileTimerClient with expires(after=1) around a 30 s sleep.
"""

import os
import sys
import time

import cohort_heartbeat


def wedged_in_allreduce():
    time.sleep(3600)


def heartbeat_hang(hung_rank):
    rank = int(os.environ["RANK"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    open(f"attempt_{attempt}.rank{rank}", "w").close()
    for step in range(5):
        assert cohort_heartbeat.beat(step), "no heartbeat descriptor"
        time.sleep(0.05)
    if attempt == 0 and rank == hung_rank:
        wedged_in_allreduce()
    # The others wait as a collective would, but never long: a hang test must end.
    time.sleep(0.2)


def file_timer():
    import torch.distributed.elastic.timer as timer

    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    open("timer_set", "w").write(str(time.time()))
    with timer.expires(after=1, scope="long_sleep"):
        time.sleep(30)
    print("the timer did not fire", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "heartbeat-hang":
        heartbeat_hang(int(sys.argv[2]))
    elif mode == "file-timer":
        file_timer()
    else:
        sys.exit(f"unknown mode {mode}")
