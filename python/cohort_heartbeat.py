"""Heartbeats from a training worker to the cohort agent that started it.

cohort gives every worker COHORT_HEARTBEAT_FD, a pipe the agent reads; each write is one sign of
life, and ``step N`` also reports the training step. With ``cohort run --hang-timeout S`` a worker
that gives no sign of life (a heartbeat or an output line) for S seconds is declared hung: its
stacks are taken and it is restarted like a failed worker.

    import cohort_heartbeat
    for step, batch in enumerate(loader):
        train_step(batch)
        cohort_heartbeat.beat(step)

Not under cohort (no COHORT_HEARTBEAT_FD), beat() does nothing, and so it does in a process that
inherited the variable but not the pipe (a subprocess: Python's closes descriptors above 2 by
default), whatever file has that descriptor number there. Without this module:

    fd = int(os.environ.get("COHORT_HEARTBEAT_FD", "-1"))
    if fd >= 0: os.write(fd, b"step %d\\n" % step)
"""

import os
import stat

_UNSET = object()
_fd = _UNSET


def _is_pipe(fd):
    """Whether `fd` is a pipe, as the one cohort gives its workers is.

    The variable outlives the descriptor: a subprocess inherits COHORT_HEARTBEAT_FD but not the
    pipe, and the number may be a file it opened since, which a heartbeat must not write into."""
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:  # not open
        return False


def _descriptor():
    global _fd
    if _fd is _UNSET:
        try:
            _fd = int(os.environ.get("COHORT_HEARTBEAT_FD", ""))
        except ValueError:
            _fd = None
        if _fd is not None and (_fd < 0 or not _is_pipe(_fd)):
            _fd = None
    return _fd


def _line(step):
    """The bytes of one beat; None when `step` is no integer (int() refuses it: 'epoch-1', NaN)."""
    if step is None:
        return b"\n"
    try:
        return b"step %d\n" % int(step)
    except Exception:  # whatever int() raises for the caller's object: a beat never raises
        return None


def beat(step=None):
    """Tells the agent this worker is alive (at `step`, when given). Returns True if it was sent.

    Never blocks and never raises: a full pipe or a closed descriptor drops the beat, and so does
    a step that is no integer. Does nothing where COHORT_HEARTBEAT_FD names no pipe when first
    used (a subprocess that inherited the variable but not the pipe)."""
    global _fd
    fd = _descriptor()
    line = _line(step)
    if fd is None or line is None:
        return False
    try:
        os.write(fd, line)
        return True
    except BlockingIOError:
        return False
    except OSError:
        _fd = None  # not a descriptor of ours (closed, or inherited by an unrelated program)
        return False
