"""What the benchmark drivers read of a server process they started, and how they stop it."""
import os
import signal
import subprocess


def status_kib(pid, field="VmHWM"):
    """A memory field of /proc/PID/status (VmHWM, VmRSS, ...) in KiB; 0 if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    """User + system CPU time of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc):
    """SIGTERM, then SIGKILL after 10 s; waits for it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
