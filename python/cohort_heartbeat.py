"""Heartbeats from a training worker to the cohort agent that started it.

cohort gives every worker COHORT_HEARTBEAT_FD, a pipe the agent reads; each write is one sign of
life, and ``step N`` also reports the training step. With ``cohort run --hang-timeout S`` a worker
that gives no sign of life (a heartbeat or an output line) for S seconds is declared hung: its
stacks are taken and it is restarted like a failed worker.

    import cohort_heartbeat
    for step, batch in enumerate(loader):
        train_step(batch)
        cohort_heartbeat.beat(step)

Not under cohort (no COHORT_HEARTBEAT_FD), beat() does nothing. Without this module:

    fd = int(os.environ.get("COHORT_HEARTBEAT_FD", "-1"))
    if fd >= 0: os.write(fd, b"step %d\\n" % step)
"""

import os

_UNSET = object()
_fd = _UNSET


def _descriptor():
    global _fd
    if _fd is _UNSET:
        try:
            _fd = int(os.environ.get("COHORT_HEARTBEAT_FD", ""))
        except ValueError:
            _fd = None
        if _fd is not None and _fd < 0:
            _fd = None
    return _fd


def beat(step=None):
    """Tells the agent this worker is alive (at `step`, when given). Returns True if it was sent.

    Never blocks and never raises: a full pipe or a closed descriptor drops the beat."""
    global _fd
    fd = _descriptor()
    if fd is None:
        return False
    line = b"\n" if step is None else b"step %d\n" % int(step)
    try:
        os.write(fd, line)
        return True
    except BlockingIOError:
        return False
    except OSError:
        _fd = None  # not a descriptor of ours (closed, or inherited by an unrelated program)
        return False
