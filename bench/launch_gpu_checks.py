#!/usr/bin/python3
"""What the GPU checks and the worker cgroups cost a launch of `cohort run`, side by side.

Measures, interleaved in one run, the median wall time of
  cohort run --standalone --no-python --nproc-per-node 8 /bin/true
  - nvml-off:    NVML pointed nowhere (COHORT_NVML_LIBRARY=/nonexistent): no GPU checks at all;
  - nvml-slow:   the NVML test double with 8 GPUs made as slow as a real driver (nvmlInit 11 ms,
                 nvmlShutdown 8 ms, each device query --query-ms; the figures seen on an H200);
  - nvml-real:   with --real, the machine's own libnvidia-ml (on a GPU node);
  each with and without worker cgroups (COHORT_NO_CGROUP=1), and a bare shell that spawns the
  same 8 processes. The goal: a launch with the GPU checks within 1.3x of the same launch
  without NVML.

Usage: bench/launch_gpu_checks.py [--build build] [--runs 20] [--query-ms 0] [--real]
                                  [--json FILE] [--baseline OTHER_BUILD]
(--build names the folder that holds bin/cohort and, for nvml-slow, the test double; with --real
and no double, only the machine's NVML is measured.)
Prints a Markdown table (paste it into docs/BENCHMARKS.md).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUS_IDS = ",".join(f"0000:{0x07 + 4 * i:02x}:00.0" for i in range(8))


def fake_nvml(build):
    found = glob.glob(os.path.join(build, "**", "libfake_nvml.so"), recursive=True)
    return found[0] if found else None


def variants(args):
    cohort = os.path.join(args.build, "bin", "cohort")
    launch = [cohort, "run", "--standalone", "--no-python", "--nproc-per-node", "8", "/bin/true"]
    double = fake_nvml(args.build)
    nvml = {"nvml-off": {"COHORT_NVML_LIBRARY": "/nonexistent"}}
    if double:
        nvml["nvml-slow"] = {"COHORT_NVML_LIBRARY": double, "COHORT_FAKE_NVML_BUS_IDS": BUS_IDS,
                             "COHORT_FAKE_NVML_INIT_MS": "11", "COHORT_FAKE_NVML_SHUTDOWN_MS": "8",
                             "COHORT_FAKE_NVML_QUERY_MS": str(args.query_ms)}
    elif not args.real:
        sys.exit(f"no libfake_nvml.so under {args.build}: build the fake_nvml target")
    if args.real:
        nvml["nvml-real"] = {}
    runs = {"bare shell": (["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait"],
                           {})}
    for name, env in nvml.items():
        runs[name] = (launch, env)
        runs[name + ", no cgroup"] = (launch, dict(env, COHORT_NO_CGROUP="1"))
    if args.baseline:  # another build of cohort (an older commit), same variants, same double
        old = [os.path.join(args.baseline, "bin", "cohort")] + launch[1:]
        for name, env in nvml.items():
            runs["baseline " + name] = (old, env)
            runs["baseline " + name + ", no cgroup"] = (old, dict(env, COHORT_NO_CGROUP="1"))
    return runs


def timed_ms(argv, extra_env):
    env = dict(os.environ, **extra_env)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"exit {done.returncode} from {argv} with {extra_env}: {done.stderr.decode()}")
    return elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--query-ms", type=int, default=0)
    parser.add_argument("--real", action="store_true", help="also the machine's own NVML")
    parser.add_argument("--json", help="write the medians here")
    parser.add_argument("--baseline", help="a build folder of another commit, measured alongside")
    args = parser.parse_args()
    runs = variants(args)
    samples = {name: [] for name in runs}
    for _ in range(args.runs):  # interleaved: a noisy moment costs every variant alike
        for name, (argv, env) in runs.items():
            samples[name].append(timed_ms(argv, env))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["nvml-off"]
    print(f"cohort run --standalone --no-python --nproc-per-node 8 /bin/true, medians of "
          f"{args.runs} (nvml-slow: init 11 ms, shutdown 8 ms, {args.query_ms} ms a query)\n")
    print("| launch | median | vs nvml-off |")
    print("|---|---|---|")
    for name, median in medians.items():
        print(f"| {name} | {median:.1f} ms | {median / base:.2f}x |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"runs": args.runs, "query_ms": args.query_ms, "medians_ms": medians}, out,
                      indent=1)


if __name__ == "__main__":
    main()
