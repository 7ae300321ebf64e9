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
