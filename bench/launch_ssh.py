#!/usr/bin/python3
"""`cohort launch` over real ssh, 4 hosts x 2 workers, side by side with an ssh fan-out and torchrun.

Starts 4 real OpenSSH servers on 127.0.0.2 .. 127.0.0.5 (one sshd per address, listening on that
address only, on one free port; own host keys and one user key made with ssh-keygen in a temporary
directory), then measures, interleaved per iteration, the median of:
  - floor:    4 parallel `ssh HOST date +%s%N` (the same ssh options as cohort's; `date` instead of
              `true` so that the time the remote command ran is known too): one ssh fan-out;
  - cohort:   cohort launch -H 127.0.0.2:2,...,127.0.0.5:2 -x OMP_NUM_THREADS=1 <ssh flags>
              --no-python WORKER DIR;
  - torchrun: 4 parallel `ssh HOST 'cd ...; exec env ... torchrun --nnodes 4 --nproc_per_node 2
              --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:P --rdzv_id ID --rdzv_conf is_host=false
              --monitor_interval 0.1 --no_python WORKER DIR'`, the c10d store served by
              `cohortd --host 127.0.0.1 --tcpstore-port 0` (Debian's PyTorch 1.13 torchrun, through
              tests/integration/torchrun_debian12.py), i.e. what users do today without a launcher.
WORKER is a /bin/sh script that writes `date +%s%N` into DIR/$RANK and exits 0. Two figures each:
from the command's start to the LAST of the 8 workers running (the floor: to the last remote
`date`), and from the command's start to its exit (every ssh gone).

Usage: bench/launch_ssh.py [--build build] [--runs 10] [--torchrun-runs 3]
Prints a Markdown table (paste it into docs/BENCHMARKS.md). Needs /usr/sbin/sshd, /usr/bin/ssh,
/usr/bin/ssh-keygen and root (sshd's privilege separation, root's login on the test servers).
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = os.path.join(ROOT, "tests", "integration", "torchrun_debian12.py")
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
SLOTS = 2
WORKERS = len(HOSTS) * SLOTS


class Failed(Exception):
    pass


ACTIVE = []  # launches in flight, killed (process group) should the bench stop half way


def run_checked(argv, timeout, **kwargs):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, **kwargs)
    if done.returncode != 0:
        raise Failed(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}")
    return done.stdout


def kill_group(proc, grace=0.0):
    """Stops the process group of a child started with start_new_session=True and reaps it:
    SIGTERM first when grace > 0 (cohort launch then stops every host and closes its ssh
    connections), SIGKILL after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
        if sig == signal.SIGTERM and grace <= 0:
            continue
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            pass


def descendants(pid):
    """Every live descendant of pid, from /proc (sshd's per-connection children call setsid)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def accepts(address, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((address, port)) == 0


def free_port():
    """A port free on every host address (bound and released; sshd binds it right after)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOSTS[0], 0))
            port = s.getsockname()[1]
        ok = True
        for address in HOSTS[1:]:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((address, port))
                except OSError:
                    ok = False
        if ok:
            return port
    raise Failed("no port free on every host address")


class SshHosts:
    """One sshd per loopback address, all accepting one generated user key."""

    def __init__(self, base):
        self.dir = os.path.join(base, "ssh")
        os.makedirs(self.dir)
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        self.servers = []
        self.key = os.path.join(self.dir, "user_key")
        self.keygen(self.key)
        shutil.copy(self.key + ".pub", os.path.join(self.dir, "authorized_keys"))
        self.port = free_port()
        for address in HOSTS:
            self.start(address)

    def keygen(self, path):
        run_checked(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], 30)

    def start(self, address):
        host_dir = os.path.join(self.dir, address)
        os.makedirs(host_dir)
        self.keygen(os.path.join(host_dir, "host_key"))
        config = os.path.join(host_dir, "sshd_config")
        with open(config, "w") as f:
            f.write(f"ListenAddress {address}:{self.port}\n"
                    f"HostKey {host_dir}/host_key\n"
                    f"AuthorizedKeysFile {self.dir}/authorized_keys\n"
                    "PidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nLogLevel ERROR\n")
        log = open(os.path.join(host_dir, "sshd.log"), "w")
        self.servers.append(subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", config],
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             start_new_session=True))
        log.close()
        deadline = time.monotonic() + 10
        while not accepts(address, self.port):
            if self.servers[-1].poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(host_dir, "sshd.log")) as f:
                    raise Failed(f"sshd on {address}:{self.port} did not start:\n{f.read()}")
            time.sleep(0.02)

    def options(self):
        """The -o options every ssh here uses (cohort gets them as --ssh-option)."""
        return [f"IdentityFile={self.key}", "IdentitiesOnly=yes", "UserKnownHostsFile=/dev/null",
                "StrictHostKeyChecking=no", "LogLevel=ERROR"]

    def ssh_argv(self, host, line):
        # What cohort's own ssh command lines carry, less connection sharing.
        argv = ["/usr/bin/ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-p", str(self.port)]
        for option in self.options():
            argv += ["-o", option]
        return argv + [host, line]

    def cohort_flags(self):
        flags = ["--ssh-port", str(self.port), "--connect-timeout", "5"]
        for option in self.options():
            flags += ["--ssh-option", option]
        return flags

    def stop(self):
        for server in self.servers:
            for pid in descendants(server.pid):  # sessions still open
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            kill_group(server)


def shell_quote(word):
    if word and all(c.isalnum() or c in "/.-_:,=+@" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def start_times(out_dir):
    """The start times (ns) the workers wrote, one file per global rank."""
    names = sorted(os.listdir(out_dir))
    if names != sorted(str(rank) for rank in range(WORKERS)):
        raise Failed(f"workers wrote {names}, expected ranks 0..{WORKERS - 1}")
    times = []
    for name in names:
        with open(os.path.join(out_dir, name)) as f:
            times.append(int(f.read().strip()))
    return times


def fresh(out_dir):
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)


def timed_group(argvs, timeout, cwd):
    """Starts every argv at once, waits for all; (start wall ns, elapsed s, outputs)."""
    start_ns = time.time_ns()
    start = time.perf_counter()
    procs = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=cwd,
                              start_new_session=True) for argv in argvs]
    ACTIVE.extend(procs)
    outputs = []
    deadline = start + timeout
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.perf_counter()))
            outputs.append(out)
    except subprocess.TimeoutExpired:
        for proc in procs:
            kill_group(proc)
        raise Failed(f"timed out after {timeout} s: {' '.join(argvs[0])}")
    elapsed = time.perf_counter() - start
    del ACTIVE[:]
    for argv, proc, out in zip(argvs, procs, outputs):
        if proc.returncode != 0:
            raise Failed(f"{' '.join(argv)} exited {proc.returncode}:\n{out}")
    return start_ns, elapsed, outputs


def clean_up(hosts, base, daemon=None):
    """Stops everything a bench started (its launches, `daemon`, the sshd `hosts`, whatever of
    theirs is left) and removes `base`; ignores SIGTERM and SIGINT meanwhile, so that the clean-up
    itself runs to the end."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for proc in list(ACTIVE):
        kill_group(proc, grace=3)
    if daemon is not None:
        kill_group(daemon)
    if hosts is not None:
        hosts.stop()
        # Anything of ours still running (an ssh control master, a session) names our port or dir.
        for pattern in (f"-p {hosts.port}", base):
            found = subprocess.run(["pgrep", "-f", "--", pattern], stdout=subprocess.PIPE,
                                   text=True, timeout=10).stdout.split()
            for pid in (int(pid) for pid in found if int(pid) != os.getpid()):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        name = f.read().replace(b"\0", b" ").decode(errors="replace")[:100]
                    os.kill(pid, signal.SIGKILL)
                    print(f"note: killed leftover process {pid}: {name}", file=sys.stderr)
                except (OSError, ProcessLookupError):
                    pass
    shutil.rmtree(base, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--torchrun-runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="seconds per launch")
    parser.add_argument("--baseline", metavar="BUILD",
                        help="another build's cohort launch, measured interleaved too")
    args = parser.parse_args()
    cohort = os.path.abspath(os.path.join(args.build, "bin", "cohort"))
    cohortd = os.path.abspath(os.path.join(args.build, "bin", "cohortd"))
    for path in (cohort, cohortd, "/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"):
        if not os.access(path, os.X_OK):
            sys.exit(f"missing {path}")

    # Ctrl-C and SIGTERM both unwind through the finally below.
    def interrupted(*_):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, interrupted)
    base = tempfile.mkdtemp(prefix="cohort_bench_ssh_")
    hosts = None
    daemon = None
    try:
        hosts = SshHosts(base)
        work = os.path.join(base, "work")
        out_dir = os.path.join(base, "started")
        os.makedirs(work)
        worker = os.path.join(base, "worker.sh")
        with open(worker, "w") as f:
            f.write('#!/bin/sh\ndate +%s%N > "$1/$RANK"\n')
        os.chmod(worker, 0o755)

        port_file = os.path.join(base, "tcpstore_port")
        daemon_log = open(os.path.join(base, "cohortd.log"), "w")
        daemon = subprocess.Popen([cohortd, "--host", "127.0.0.1", "--port", "0",
                                   "--tcpstore-port", "0", "--tcpstore-port-file", port_file],
                                  stdin=subprocess.DEVNULL, stdout=daemon_log, stderr=daemon_log,
                                  start_new_session=True)
        daemon_log.close()
        deadline = time.monotonic() + 10
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise Failed("cohortd did not write its TCPStore port")
            time.sleep(0.02)
        time.sleep(0.05)
        store_port = int(open(port_file).read().strip())

        floor_argvs = [hosts.ssh_argv(host, "date +%s%N") for host in HOSTS]
        def launch_argv(binary):
            return ([binary, "launch", "-H", ",".join(f"{h}:{SLOTS}" for h in HOSTS),
                     "-x", "OMP_NUM_THREADS=1"] + hosts.cohort_flags() +
                    ["--no-python", worker, out_dir])

        cohort_argv = launch_argv(cohort)
        baseline_argv = (launch_argv(os.path.abspath(os.path.join(args.baseline, "bin", "cohort")))
                         if args.baseline else None)
        # What cohort forwards by itself (PYTHON*), and OMP_NUM_THREADS=1 as with -x: ssh
        # sessions get root's login environment, not this one.
        remote_env = {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}
        remote_env["OMP_NUM_THREADS"] = "1"

        def torchrun_argvs(run_id):
            line = (f"cd -- {shell_quote(work)} || exit 2; exec env " +
                    " ".join(shell_quote(f"{k}={v}") for k, v in sorted(remote_env.items())) +
                    f" /usr/bin/python3 {shell_quote(TORCHRUN)} --nnodes {len(HOSTS)}"
                    f" --nproc_per_node {SLOTS} --rdzv_backend c10d"
                    f" --rdzv_endpoint 127.0.0.1:{store_port} --rdzv_id {run_id}"
                    f" --rdzv_conf is_host=false --monitor_interval 0.1"
                    f" --no_python {shell_quote(worker)} {shell_quote(out_dir)}")
            return [hosts.ssh_argv(host, line) for host in HOSTS]

        samples = {name: {"running": [], "total": []}
                   for name in ("floor", "cohort", "torchrun", "baseline")}

        def measure_floor(record=True):
            start_ns, elapsed, outputs = timed_group(floor_argvs, args.timeout, work)
            ran = [int(out.strip().splitlines()[-1]) for out in outputs]
            if record:
                samples["floor"]["running"].append((max(ran) - start_ns) / 1e6)
                samples["floor"]["total"].append(elapsed * 1000)

        def measure_launch(name, argvs, record=True):
            fresh(out_dir)
            start_ns, elapsed, _ = timed_group(argvs, args.timeout, work)
            started = start_times(out_dir)
            if record:
                samples[name]["running"].append((max(started) - start_ns) / 1e6)
                samples[name]["total"].append(elapsed * 1000)

        run_ids = iter(range(1_000_000))
        # One untimed round of each first: key loading, page cache, Python's bytecode.
        measure_floor(record=False)
        measure_launch("cohort", [cohort_argv], record=False)
        if baseline_argv:
            measure_launch("baseline", [baseline_argv], record=False)
        if args.torchrun_runs > 0:
            measure_launch("torchrun", torchrun_argvs(f"bench{next(run_ids)}"), record=False)
        for i in range(args.runs):
            measure_floor()
            measure_launch("cohort", [cohort_argv])
            if baseline_argv:
                measure_launch("baseline", [baseline_argv])
            if i < args.torchrun_runs:
                measure_launch("torchrun", torchrun_argvs(f"bench{next(run_ids)}"))
            print(f"run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
    except Failed as error:
        sys.exit(f"launch_ssh: {error}")
    except KeyboardInterrupt:
        print("launch_ssh: interrupted; stopping everything it started", file=sys.stderr)
        sys.exit(130)
    finally:
        clean_up(hosts, base, daemon)

    med = {name: {k: statistics.median(v) if v else None for k, v in figures.items()}
           for name, figures in samples.items()}

    def ms(value):
        return "–" if value is None else f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms"

    def ratio(a, b):
        return "–" if a is None or b is None else f"{a / b:.2f}x" if a / b < 10 else f"{a / b:.0f}x"

    print("| measurement (median) | ssh fan-out (floor) | cohort launch | torchrun over ssh | "
          "cohort / floor | torchrun / floor | torchrun / cohort |")
    print("|---|---|---|---|---|---|---|")
    for key, label in (("running", f"start to all {WORKERS} workers running"),
                       ("total", "start to exit")):
        f, c, t = med["floor"][key], med["cohort"][key], med["torchrun"][key]
        print(f"| {label} | {ms(f)} | {ms(c)} | {ms(t)} | {ratio(c, f)} | {ratio(t, f)} | "
              f"{ratio(t, c)} |")
    if args.baseline:
        print()
        print(f"| measurement (median) | cohort launch | baseline ({args.baseline}) | "
              "baseline / cohort | cohort / floor | baseline / floor |")
        print("|---|---|---|---|---|---|")
        for key, label in (("running", f"start to all {WORKERS} workers running"),
                           ("total", "start to exit")):
            f, c, b = med["floor"][key], med["cohort"][key], med["baseline"][key]
            print(f"| {label} | {ms(c)} | {ms(b)} | {ratio(b, c)} | {ratio(c, f)} | "
                  f"{ratio(b, f)} |")
    print()
    print(f"runs: {args.runs} (floor, cohort{', baseline' if args.baseline else ''}), {min(args.runs, args.torchrun_runs)} (torchrun), "
          f"interleaved; {len(HOSTS)} sshd on {HOSTS[0]}..{HOSTS[-1]}, {SLOTS} workers each; "
          f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end. "
          f"The floor's first row is to the last remote `date`.")


if __name__ == "__main__":
    main()
