"""Compute one pure function in a forked child while the parent does other work.

Parsing a large dump is CPU-bound Python; its two halves are independent, so a second core
takes half of that part of the wall time. ``fork`` rather than a process pool: the child needs
the text the parent already holds, which fork shares copy-on-write where a pool would pickle
it across. The child sends its result back pickled through a pipe and leaves with
``os._exit`` (no atexit handlers, no flushing of the parent's buffered output).

The answer never depends on whether the fork happened: without a spare CPU, or when the child
fails in any way (an exception, a crash, a kill), :meth:`Pending.result` computes the value in
the parent instead.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

T = TypeVar("T")
_READ = 1 << 20


def spare_cpu() -> bool:
    """Whether forking can help and is safe: POSIX, a second CPU we may use, and no other
    thread in this process (a lock another thread holds would stay locked in the child)."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) > 1
    return (os.cpu_count() or 1) > 1


@dataclass
class Pending(Generic[T]):
    """A value being computed by a forked child (``pid``), or later here (``pid`` None)."""

    compute: Callable[[], T]
    pid: int | None = None
    pipe: int = -1

    def result(self) -> T:
        """The child's value; computed here when there is no child or it failed."""
        if self.pid is None:
            return self.compute()
        with os.fdopen(self.pipe, "rb") as reader:
            data = b"".join(iter(partial(reader.read, _READ), b""))
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data:
            value: T = pickle.loads(data)
            return value
        return self.compute()

    def cancel(self) -> None:
        """Stop and reap the child: the caller is unwinding and will not ask for the value."""
        if self.pid is not None:
            os.close(self.pipe)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None


def in_background(compute: Callable[[], T]) -> Pending[T]:
    """Start *compute* in a forked child when :func:`spare_cpu` allows."""
    if not spare_cpu():
        return Pending(compute)
    reader, writer = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # a process limit (EAGAIN) or no memory: compute it here later
        os.close(reader)
        os.close(writer)
        return Pending(compute)
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        status = 1
        try:
            os.close(reader)
            data = pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(writer, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    return Pending(compute, pid, reader)
