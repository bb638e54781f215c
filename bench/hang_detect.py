#!/usr/bin/python3
"""Hang detection: how soon cohort notices a wedged worker, and how soon it runs again, against
the real torchrun on the same worker.

The worker beats 10 steps 50 ms apart through the shipped cohort_heartbeat module (a no-op under
torchrun), notes the wall time of its last beat, then, on its first attempt, sleeps for an hour
as a rank wedged in a collective would. Its second attempt notes the time of its first beat and
exits 0. Measured, per run:
  - detection: the time cohort's "made no progress" line reached this script minus the worker's
    last beat (the floor is --hang-timeout; the rest is cohort's own latency);
  - restart: the second attempt's first beat minus that line (the stacks, the stop, the new
    round, a fresh Python interpreter), beside a bare Python start for scale;
and for torchrun 1.13 (Debian's, through tests/integration/torchrun_debian12.py, --max_restarts 1
--monitor_interval 0.1), whether it restarted the worker within --torchrun-wait seconds (it never
notices a hang: the worker is alive), after which it is stopped.

Usage: bench/hang_detect.py [--build build] [--runs 5] [--hang-timeout 1] [--torchrun-wait 30]
Prints a Markdown table (paste it into docs/BENCHMARKS.md).
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = os.path.join(ROOT, "tests", "integration", "torchrun_debian12.py")
PYTHON = "/usr/bin/python3"

WORKER = r'''
import os, sys, time
sys.path.append(os.environ["COHORT_PYTHON_DIR"])
import cohort_heartbeat

attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
for step in range(10):
    cohort_heartbeat.beat(step)
    now = time.time()
    if attempt > 0 and step == 0:
        open(f"first_beat.{attempt}", "w").write(repr(now))
    time.sleep(0.05)
open(f"last_beat.{attempt}", "w").write(repr(now))
if attempt == 0:
    time.sleep(3600)  # wedged
'''


def read_time(path):
    with open(path) as f:
        return float(f.read())


def stream_lines(pipe, lines):
    for line in pipe:
        lines.append((time.time(), line))


def cohort_once(cohort, worker, hang_timeout, work_dir):
    """One run; returns (detection s, restart s, declared to the new round's start s)."""
    env = dict(os.environ, COHORT_PYTHON_DIR=os.path.join(ROOT, "python"), TMPDIR=work_dir)
    argv = [cohort, "run", "--standalone", "--nproc-per-node", "1", "--hang-timeout",
            str(hang_timeout), "--max-restarts", "1", "--log-dir", "/dev/null", "-v", worker]
    proc = subprocess.Popen(argv, cwd=work_dir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=stream_lines, args=(proc.stderr, lines))
    reader.start()
    try:
        code = proc.wait(timeout=60 + 10 * hang_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        sys.exit("cohort did not finish within the bound")
    reader.join()
    if code != 0:
        sys.exit(f"cohort exited {code}:\n" + "".join(line for _, line in lines))
    declared = next((at for at, line in lines if "made no progress for" in line), None)
    if declared is None:
        sys.exit("no hang was declared:\n" + "".join(line for _, line in lines))
    rejoined = next((at for at, line in lines if "joined round=1" in line), None)
    last_beat = read_time(os.path.join(work_dir, "last_beat.0"))
    first_beat = read_time(os.path.join(work_dir, "first_beat.1"))
    return declared - last_beat, first_beat - declared, rejoined - declared


def python_start_s():
    """Wall time of a bare Python start and exit: the floor under any restart of a Python worker."""
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    return time.perf_counter() - started


def torchrun_once(worker, wait_s, work_dir):
    """Returns the seconds waited, and whether torchrun restarted the worker meanwhile."""
    env = dict(os.environ, COHORT_PYTHON_DIR=os.path.join(ROOT, "python"), TMPDIR=work_dir)
    argv = [PYTHON, TORCHRUN, "--standalone", "--nproc_per_node", "1", "--max_restarts", "1",
            "--monitor_interval", "0.1", worker]
    started = time.time()
    proc = subprocess.Popen(argv, cwd=work_dir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    restarted = False
    while time.time() - started < wait_s and proc.poll() is None:
        if os.path.exists(os.path.join(work_dir, "first_beat.1")):
            restarted = True
            break
        time.sleep(0.1)
    waited = time.time() - started
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return waited, restarted


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hang-timeout", type=float, default=1.0)
    parser.add_argument("--torchrun-wait", type=float, default=30.0)
    args = parser.parse_args()
    cohort = os.path.join(args.build, "bin", "cohort")
    with tempfile.TemporaryDirectory() as scratch:
        worker = os.path.join(scratch, "hang_bench_worker.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        detections, restarts, python_starts, regroups = [], [], [], []
        for run in range(args.runs):
            python_starts.append(python_start_s())
            work_dir = os.path.join(scratch, f"cohort{run}")
            os.mkdir(work_dir)
            detection, restart, regroup = cohort_once(cohort, worker, args.hang_timeout, work_dir)
            regroups.append(regroup)
            detections.append(detection)
            restarts.append(restart)
        work_dir = os.path.join(scratch, "torchrun")
        os.mkdir(work_dir)
        waited, restarted = torchrun_once(worker, args.torchrun_wait, work_dir)
    detection = statistics.median(detections)
    restart = statistics.median(restarts)
    python_start = statistics.median(python_starts)
    regroup = statistics.median(regroups)
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}, {args.runs} cohort runs, --hang-timeout {args.hang_timeout} s")
    print()
    print("| launcher | hang detected (declared - last beat) | beyond the timeout | "
          "restart (declared - 2nd attempt's first beat) |")
    print("|---|---|---|---|")
    print(f"| cohort run | {detection * 1000:.0f} ms (min {min(detections) * 1000:.0f}, "
          f"max {max(detections) * 1000:.0f}) | {(detection - args.hang_timeout) * 1000:.0f} ms "
          f"| {restart * 1000:.0f} ms (min {min(restarts) * 1000:.0f}, "
          f"max {max(restarts) * 1000:.0f}) |")
    torchrun_text = ("restarted (unexpected)" if restarted
                     else f"not detected in {waited:.0f} s (stopped by the benchmark)")
    print(f"| torchrun 1.13 | {torchrun_text} | - | never |")
    print()
    print(f"of the restart, cohort's own part (declared to the new round's workers spawned): "
          f"{regroup * 1000:.0f} ms; the rest is the worker's interpreter starting again "
          f"(a bare `{PYTHON} -c pass`: {python_start * 1000:.0f} ms)")
    print(f"detection, torchrun / cohort: more than {waited / detection:.0f}x "
          f"(a lower bound: torchrun was stopped, not done)")


if __name__ == "__main__":
    main()
