"""The forked helper: a value from a child when a CPU is spare, the same value computed here
when not, and no child left behind."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from topograph_slurm.sources.ibnetdiscover import fork

needs_fork = pytest.mark.skipif(
    not fork.spare_cpu(), reason="needs a second CPU and a single-threaded test process"
)


@needs_fork
def test_value_comes_from_a_child_process() -> None:
    pending = fork.in_background(os.getpid)
    assert pending.pid is not None
    assert pending.result() not in (os.getpid(), None)


@needs_fork
def test_a_failing_child_means_the_value_is_computed_here() -> None:
    parent = os.getpid()

    def only_here() -> str:
        if os.getpid() != parent:
            raise RuntimeError("child fails")
        return "here"

    assert fork.in_background(only_here).result() == "here"


@needs_fork
def test_a_killed_child_means_the_value_is_computed_here() -> None:
    parent = os.getpid()

    def die_in_child() -> int:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return 7

    assert fork.in_background(die_in_child).result() == 7


@needs_fork
def test_cancel_reaps_the_child() -> None:
    release = threading.Event()
    pending = fork.in_background(lambda: release.wait(60))
    pid = pending.pid
    assert pid is not None
    pending.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    pending.cancel()  # twice is harmless


def test_no_fork_while_another_thread_runs() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert not fork.spare_cpu()
        pending = fork.in_background(os.getpid)
        assert pending.pid is None and pending.result() == os.getpid()
    finally:
        release.set()
        thread.join()


def test_no_fork_on_one_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert not fork.spare_cpu()
    assert fork.in_background(os.getpid).pid is None


def test_a_failed_fork_means_the_value_is_computed_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fork, "spare_cpu", lambda: True)

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    pending = fork.in_background(os.getpid)
    assert pending.pid is None and pending.result() == os.getpid()


def _fed(feed: fork.Feed[list[int]]) -> tuple[int, int]:
    """What a child computes from a fed value: its pid and the value's sum."""
    return os.getpid(), sum(feed.get())


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@needs_fork
def test_a_child_waits_for_the_value_the_parent_feeds_after_the_fork() -> None:
    before = _open_fds()
    feed: fork.Feed[list[int]] = fork.Feed()
    other: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: (*_fed(feed), sum(other.get())), feed, other)
    big = list(range(1 << 20))  # larger than a pipe holds: the parent must not block on it
    feed.put(big)
    other.put([5])
    pid, total, then = pending.result()
    assert pid not in (os.getpid(), None) and (total, then) == (sum(big), 5)
    assert feed.file < 0 and other.file < 0, "the parent's ends close once it handed over"
    assert _open_fds() == before


@needs_fork
def test_a_child_whose_parent_never_feeds_it_fails_and_the_value_is_computed_here() -> None:
    """The parent gives up its ends without feeding: the child sees EOF (no hang) and fails,
    and the parent computes the value with what it holds."""
    feed: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: _fed(feed), feed)
    feed.close()
    feed.value = [1, 2]
    assert pending.result() == (os.getpid(), 3)


@needs_fork
def test_cancel_stops_a_child_waiting_for_its_feed() -> None:
    feed: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: _fed(feed), feed)
    pid = pending.pid
    assert pid is not None
    pending.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert feed.file < 0


def test_without_a_fork_the_fed_value_is_used_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fork, "spare_cpu", lambda: False)
    feed: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: _fed(feed), feed)
    feed.put([4, 5])
    assert pending.pid is None and feed.file < 0
    assert pending.result() == (os.getpid(), 9)


def test_a_failed_fork_with_a_feed_leaves_no_descriptor_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fork, "spare_cpu", lambda: True)
    monkeypatch.setattr(os, "fork", lambda: (_ for _ in ()).throw(OSError(11, "EAGAIN")))
    before = _open_fds()
    feed: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: _fed(feed), feed)
    assert pending.pid is None and _open_fds() == before
    feed.put([1])
    assert pending.result() == (os.getpid(), 1)


@needs_fork
def test_a_feed_that_cannot_be_written_means_the_value_is_computed_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full memfd (a memory limit) or a short write: the child gets EOF and fails, the
    parent computes the value itself; no error escapes put()."""
    feed: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: _fed(feed), feed)

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    feed.put([2, 3])
    assert feed.file < 0 and pending.result() == (os.getpid(), 5)


def test_a_feed_without_descriptors_means_no_fork_and_nothing_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fork, "spare_cpu", lambda: True)

    def no_pipe() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_pipe)
    before = _open_fds()
    feed: fork.Feed[list[int]] = fork.Feed()
    pending = fork.in_background(lambda: _fed(feed), feed)
    assert pending.pid is None and feed.file < 0 and _open_fds() == before
    feed.put([4])
    assert pending.result() == (os.getpid(), 4)
