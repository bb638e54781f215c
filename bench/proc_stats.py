"""What the benchmark drivers read of a server process they started, and how they start and stop it."""
import os
import resource
import signal
import subprocess
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def raise_nofile():
    """Raises this process's soft descriptor limit to the hard one (also a preexec_fn)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def wait_for_port_file(path, proc, timeout, name="server"):
    """The port a server started as `proc` writes to `path`; exits if it dies or takes too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        if proc.poll() is not None:
            sys.exit(f"{name} exited early with {proc.returncode}")
        time.sleep(0.02)
    sys.exit(f"{name}: no port in {path} after {timeout} s")


def status_kib(pid, field="VmHWM"):
    """A memory field of /proc/PID/status (VmHWM, VmRSS, ...) in KiB; 0 if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    """(user, system) CPU ticks of a live process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime


def cpu_seconds(pid):
    """User + system CPU time of a live process."""
    return sum(cpu_ticks(pid)) / TICKS


def open_files_limit(pid):
    """The soft descriptor limit of a live process, or None."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


def fd_count(pid):
    """How many descriptors a live process holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def stop(proc):
    """SIGTERM, then SIGKILL after 10 s; waits for it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
