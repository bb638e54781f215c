#!/usr/bin/python3
"""Launch and restart latency of `cohort run` side by side with the real torchrun and a bare shell.

Measures, in one run, the median wall time of:
  - bare:     a shell that spawns 8 /bin/true processes and waits for them;
  - cohort:   cohort run --standalone --no-python --nproc-per-node 8 /bin/true;
  - torchrun: torchrun --standalone --no_python --nproc_per_node 8 --monitor_interval 0.1 /bin/true
              (Debian's PyTorch 1.13 torchrun, through tests/integration/torchrun_debian12.py);
  - with --torch2, also torchrun 2.6 (Debian 13's, in the root scripts/setup makes, started
              through scripts/in-torch2) and, for what entering the root costs, in-torch2 /bin/true;
and the restart cost: the same launch with 2 workers where rank 0 fails once (--max-restarts 1),
minus the same launch where nothing fails. Also cohort's peak RSS (GNU time's %M).

With --busy N, N sleeping processes run meanwhile, as on a GPU node (hundreds of processes):
what a launcher does once per process on the node shows there. With --baseline OTHER_BUILD, that
build's cohort launches too, each of its launches right after one of this build's (on a noisy
machine, interleaving is fairer than one run after the other), and its peak RSS is measured.
--torchrun-runs 0 leaves torchrun out.

Usage: bench/launch_restart.py [--build build] [--runs 30] [--torchrun-runs 5] [--torch2]
                               [--busy N] [--baseline OTHER_BUILD]
Prints a Markdown table (paste it into docs/BENCHMARKS.md).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = os.path.join(ROOT, "tests", "integration", "torchrun_debian12.py")
IN_TORCH2 = os.path.join(ROOT, "scripts", "in-torch2")


def timed(argv, env=None):
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    return elapsed, done.returncode


def median_ms(argv, runs, expect=0, setup=None):
    samples = []
    for _ in range(runs):
        if setup:
            setup()
        elapsed, code = timed(argv)
        if code != expect:
            sys.exit(f"unexpected exit {code} from {' '.join(argv)}")
        samples.append(elapsed * 1000)
    return statistics.median(samples)


def interleaved_medians_ms(argvs, runs):
    """The median of each command's `runs` launches, the commands taking turns."""
    samples = [[] for _ in argvs]
    for _ in range(runs):
        for argv, taken in zip(argvs, samples):
            elapsed, code = timed(argv)
            if code != 0:
                sys.exit(f"unexpected exit {code} from {' '.join(argv)}")
            taken.append(elapsed * 1000)
    return [statistics.median(taken) for taken in samples]


def peak_rss_kib(argv):
    done = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    return int(done.stderr.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--torchrun-runs", type=int, default=5)
    parser.add_argument("--torch2", action="store_true",
                        help="also torchrun 2.6 from the root of scripts/in-torch2")
    parser.add_argument("--busy", type=int, default=0,
                        help="this many sleeping processes run during the measurement")
    parser.add_argument("--baseline", help="another build folder, its launches interleaved")
    args = parser.parse_args()
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.busy)]
    try:
        measure(args)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def measure(args):
    cohort = os.path.join(args.build, "bin", "cohort")
    worker = os.path.join(args.build, "bin", "test_worker")
    flags = ["--standalone", "--monitor_interval", "0.1"]
    torchruns = {"torchrun": ["/usr/bin/python3", TORCHRUN] + flags} if args.torchrun_runs else {}
    if args.torch2 and args.torchrun_runs:
        torchruns["torchrun 2.6"] = [IN_TORCH2, "/usr/bin/torchrun"] + flags

    bare = ["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait"]
    cohort_launch = [cohort, "run", "--standalone", "--no-python", "--nproc-per-node", "8",
                     "/bin/true"]

    results = {}
    results["bare"] = median_ms(bare, args.runs)
    if args.baseline:
        baseline_launch = [os.path.join(args.baseline, "bin", "cohort")] + cohort_launch[1:]
        results["cohort"], results["baseline"] = interleaved_medians_ms(
            [cohort_launch, baseline_launch], args.runs)
    else:
        results["cohort"] = median_ms(cohort_launch, args.runs)
    for name, torchrun in torchruns.items():
        torchrun_launch = torchrun + ["--no_python", "--nproc_per_node", "8", "/bin/true"]
        results[name] = median_ms(torchrun_launch, args.torchrun_runs)
    if args.torch2:
        results["in-torch2"] = median_ms([IN_TORCH2, "/bin/true"], args.runs)

    state_dir = tempfile.mkdtemp(prefix="cohort_bench_")
    state = os.path.join(state_dir, "runs")

    def fresh_state():
        if os.path.exists(state):
            os.remove(state)

    def spent_state():
        with open(state, "w") as f:
            f.write("5")

    fail_once = [worker, "--only-rank", "0", "--fail-first-n-runs", "1", state, "--exit-code", "3"]
    restart = {}
    launchers = [("cohort", [cohort, "run", "--standalone", "--no-python", "--nproc-per-node", "2",
                             "--max-restarts", "1"], args.runs)]
    for name, torchrun in torchruns.items():
        launchers.append((name, torchrun + ["--no_python", "--nproc_per_node", "2",
                                            "--max_restarts", "1"], args.torchrun_runs))
    for name, prefix, runs in launchers:
        with_failure = median_ms(prefix + fail_once, runs, setup=fresh_state)
        without = median_ms(prefix + fail_once, runs, setup=spent_state)
        restart[name] = (with_failure, without, with_failure - without)

    rss = peak_rss_kib(cohort_launch)

    print("| measurement (median) | bare shell | cohort run | torchrun | torchrun / cohort | cohort / bare |")
    print("|---|---|---|---|---|---|")
    torchrun_ms = results.get("torchrun")
    torchrun_cells = (f"{torchrun_ms:.0f} ms | {torchrun_ms / results['cohort']:.0f}x"
                      if torchrun_ms else "not run | ")
    print(f"| launch 8 x /bin/true | {results['bare']:.1f} ms | {results['cohort']:.1f} ms | "
          f"{torchrun_cells} | {results['cohort'] / results['bare']:.2f}x |")
    if "torchrun 2.6" in results:
        t2 = results["torchrun 2.6"]
        print(f"| launch 8 x /bin/true, torchrun 2.6 | | {results['cohort']:.1f} ms | {t2:.0f} ms "
              f"(in-torch2 /bin/true: {results['in-torch2']:.0f} ms) | "
              f"{t2 / results['cohort']:.0f}x | |")
    print()
    print("| restart (2 workers, rank 0 fails once) | with failure | without | restart adds |")
    print("|---|---|---|---|")
    for name, (with_failure, without, added) in restart.items():
        print(f"| {name} | {with_failure:.1f} ms | {without:.1f} ms | {added:.1f} ms |")
    print()
    print(f"cohort peak RSS (launch of 8): {rss} KiB ({rss / 1024:.1f} MiB)")
    if args.baseline:
        base_rss = peak_rss_kib(baseline_launch)
        print(f"baseline ({args.baseline}), interleaved: launch {results['baseline']:.1f} ms "
              f"(this build {results['cohort'] / results['baseline']:.2f}x of it), "
              f"peak RSS {base_rss} KiB ({base_rss / 1024:.1f} MiB)")
    processes = sum(1 for name in os.listdir("/proc") if name.isdigit())
    print(f"runs: {args.runs} (cohort, bare), {args.torchrun_runs} (torchrun); "
          f"machine: {os.cpu_count()} CPUs, {processes} processes")


if __name__ == "__main__":
    main()
