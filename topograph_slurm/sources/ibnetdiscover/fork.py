"""Compute one pure function in a forked child while the parent does other work.

Parsing a large dump is CPU-bound Python; its two halves are independent, so a second core
takes half of that part of the wall time. ``fork`` rather than a process pool: the child needs
the text the parent already holds, which fork shares copy-on-write where a pool would pickle
it across. The child sends its result back pickled through a pipe and leaves with
``os._exit`` (no atexit handlers, no flushing of the parent's buffered output).

The answer never depends on whether the fork happened: without a spare CPU, or when the child
fails in any way (an exception, a crash, a kill), :meth:`Pending.result` computes the value in
the parent instead.

A child can also wait for values the parent works out after the fork (:class:`Feed`), so
that work the two would otherwise both do is done once, by the parent, while the child does
what does not need them yet.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
V = TypeVar("V")
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
    feeds: tuple[Feed[Any], ...] = ()

    def result(self) -> T:
        """The child's value; computed here when there is no child or it failed."""
        if self.pid is None:
            return self.compute()
        self._close_feeds()
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
            self._close_feeds()
            os.close(self.pipe)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None

    def _close_feeds(self) -> None:
        for feed in self.feeds:
            feed.close()


@dataclass
class Feed(Generic[V]):
    """A value the parent hands a forked child after the fork (:meth:`put`), which the
    child's computation waits for (:meth:`get`). It travels through an anonymous file (a
    memfd, or an unlinked temporary file), so the parent never blocks on a child that is not
    reading yet, and a pipe that says it is there; a child whose parent is gone gets EOFError
    instead of waiting forever. Without a fork (or in the parent, computing a failed child's
    value) :meth:`get` returns the value :meth:`put` kept."""

    value: V | None = None
    parent: int = field(default_factory=os.getpid)
    file: int = -1
    ready: tuple[int, int] = (-1, -1)

    def put(self, value: V) -> None:
        self.value = value
        if self.file < 0:
            return
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        # The child gone (a broken pipe) or the file full (memory limits): closing our ends
        # makes a waiting child fail with EOF, and Pending.result computes it here.
        with contextlib.suppress(OSError):
            if os.pwrite(self.file, data, 0) == len(data):
                os.write(self.ready[1], len(data).to_bytes(8, "little"))
        self.close()

    def get(self) -> V:
        if os.getpid() == self.parent or self.file < 0:
            return cast(V, self.value)
        head = os.read(self.ready[0], 8)
        if len(head) < 8:
            raise EOFError("the parent went away before handing its value over")
        return cast(V, pickle.loads(os.pread(self.file, int.from_bytes(head, "little"), 0)))

    def open(self) -> bool:
        """Before the fork: the file and the pipe both processes will share (False when no
        file can be made: then there is no fork)."""
        try:
            if hasattr(os, "memfd_create"):
                self.file = os.memfd_create("topograph-feed", os.MFD_CLOEXEC)
            else:  # pragma: no cover - Linux has memfd
                with tempfile.TemporaryFile() as temporary:
                    self.file = os.dup(temporary.fileno())
            self.ready = os.pipe()
        except OSError:  # out of descriptors or memory
            if self.file >= 0:
                os.close(self.file)
                self.file = -1
            return False
        return True

    def discard(self) -> None:
        """Every end, the child's too: there is no fork after all."""
        if self.file >= 0:
            os.close(self.ready[0])
        self.close()

    def close(self) -> None:
        """The parent's ends (after :meth:`put`, or when the child is not needed any more)."""
        if self.file >= 0:
            os.close(self.ready[1])
            os.close(self.file)
            self.file = -1


def in_background(compute: Callable[[], T], *feeds: Feed[Any]) -> Pending[T]:
    """Start *compute* in a forked child when :func:`spare_cpu` allows; *feeds* are how the
    parent hands it values later, one each."""
    if not spare_cpu() or not _opened(feeds):
        return Pending(compute)
    reader, writer = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # a process limit (EAGAIN) or no memory: compute it here later
        os.close(reader)
        os.close(writer)
        for feed in feeds:
            feed.discard()
        return Pending(compute)
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        status = 1
        try:
            os.close(reader)
            for feed in feeds:
                os.close(feed.ready[1])
            data = pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(writer, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    for feed in feeds:
        os.close(feed.ready[0])
    return Pending(compute, pid, reader, feeds)


def _opened(feeds: tuple[Feed[Any], ...]) -> bool:
    """Every feed opened (before the fork), or none left open."""
    for count, feed in enumerate(feeds):
        if not feed.open():
            for opened in feeds[:count]:
                opened.discard()
            return False
    return True
