"""The one runner every record hook goes through (``record start|task|node-start|node-end``):
Slurm requeues a job whose PrologSlurmctld fails and drains a node whose Prolog or Epilog
does, so whatever goes wrong inside the tool — a bug, a bad config, a full disk, a hung
scontrol or file system past the hook's deadline — becomes one line on stderr (slurmctld's or
slurmd's log) and exit 0. Only the gate's own code (``Exit.JOB_REFUSED``: a refused job
``record start`` could not hold) leaves non-zero.

What Python cannot catch (the interpreter or a module missing, a kill) the installed script
catches: it passes on that one code and turns every other into 0 (``hooks install``).
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

import click

from topograph_slurm.cli.display import warn
from topograph_slurm.errors import Exit
from topograph_slurm.model.record import HOOK_DEADLINES

F = TypeVar("F", bound=Callable[..., Any])


class DeadlineExpired(Exception):
    """The hook ran past its deadline (HOOK_DEADLINES); raised by the alarm."""


def never_fail(hook: str) -> Callable[[F], F]:
    """The click callback of record *hook* run under its deadline, every failure one warning
    line and exit 0; exit codes other than 0 and the gate's are turned into 0 the same way."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            seconds = HOOK_DEADLINES[hook]
            previous = signal.signal(signal.SIGALRM, _expired(seconds))
            signal.alarm(seconds)
            try:
                return func(*args, **kwargs)
            except click.exceptions.Exit as done:
                if done.exit_code in (Exit.OK, Exit.JOB_REFUSED):
                    raise
                _say(hook, f"exit {done.exit_code} taken as 0")
            except Exception as err:
                _say(hook, _reason(err))
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
            raise click.exceptions.Exit(Exit.OK)

        return run  # type: ignore[return-value]

    return wrap


def _expired(seconds: int) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise DeadlineExpired(f"deadline of {seconds}s passed (a hung scontrol or file system?)")

    return handler


def _say(hook: str, why: str) -> None:
    job = os.environ.get("SLURM_JOB_ID", "")
    about = f"job {job}: " if job.isdigit() and job.isascii() else ""
    warn(f"record {hook}: {about}{why}; the job goes on (a hook never fails a job or a node)")


def _reason(err: Exception) -> str:
    from topograph_slurm.errors import TopographError

    if isinstance(err, (TopographError, DeadlineExpired)):
        return str(err)
    if isinstance(err, OSError):
        return f"{err.strerror or err}{f': {err.filename}' if err.filename else ''}"
    return f"internal error ({type(err).__name__}: {str(err)[:200]})"
