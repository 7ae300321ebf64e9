"""Error types and the exit codes they map to.

Every failure a user can cause or meet (bad input, a failed fetch, a refused write) is one of
these; the CLI turns it into one line on stderr and its exit code, and only ``-v`` shows a
traceback. Codes are distinct so cron wrappers and CI can tell a stale file from a broken fabric.
"""

from __future__ import annotations

import re
from enum import IntEnum

#: The longest run of non-blank characters an error line quotes whole (a path, a hostlist);
#: a longer one is a value from outside (a 5000-digit number, a pasted file) and is cut.
MAX_QUOTED = 200
#: How much of a cut run stays on each side of the cut.
_KEPT = 40
_LONG_RUN = re.compile(rf"\S{{{MAX_QUOTED + 1},}}")


class Exit(IntEnum):
    """Process exit codes of ``topograph-slurm``."""

    OK = 0
    DIFFERS = 1  # --check: the file on disk is not what we would write
    USAGE = 2  # bad flags or option values (click's own code too)
    INPUT = 3  # unreadable or malformed input data (dump, snapshot, JSON)
    COLLECT = 4  # running a command or talking to a server failed
    CONFIG = 5  # the config file is missing, malformed or has unknown keys
    REFUSED = 6  # a guarded write refused (shrink guard, empty topology)
    LOCKED = 7  # another run holds the lock
    AUTH = 8  # credentials missing, refused by the server, or unsafely stored
    OUTPUT = 9  # an output file or directory could not be written
    APPLY = 10  # Slurm refused a change: a new topology (restored) or a health --apply update
    JOB_REFUSED = 11  # the gate refused a job it could not hold: the one code a hook passes on
    DEFERRED = 12  # generate --reconfigure waited past its bound for jobs in their prolog
    BUG = 70  # an unexpected internal error (EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as a shell reports it)


#: Each code in a few words, as ``topograph-slurm --help`` lists them (docs/exit-codes.md says
#: more; a test keeps the two and the enumeration the same set).
SUMMARY = {
    Exit.OK: "ok",
    Exit.DIFFERS: "--check, diff or a verdict found a difference",
    Exit.USAGE: "usage",
    Exit.INPUT: "bad input",
    Exit.COLLECT: "collect failure",
    Exit.CONFIG: "config error",
    Exit.REFUSED: "write refused by a guard",
    Exit.LOCKED: "locked by another run",
    Exit.AUTH: "authentication",
    Exit.OUTPUT: "output not writable",
    Exit.APPLY: "Slurm refused a change (generate --reconfigure: restored; health --apply)",
    Exit.JOB_REFUSED: "record start's gate refused the job and could not hold it",
    Exit.DEFERRED: "reconfigure deferred past its bound (jobs in their prolog)",
    Exit.BUG: "internal error",
    Exit.INTERRUPTED: "interrupted",
}


def capped(message: str) -> str:
    """*message* with every run of more than :data:`MAX_QUOTED` non-blank characters cut to
    its ends and its length (``99…[5000 characters]…99``): the one rule for every error line,
    whatever value it quotes, so a hostile input cannot make a line of megabytes."""
    return _LONG_RUN.sub(
        lambda run: f"{run[0][:_KEPT]}…[{len(run[0])} characters]…{run[0][-_KEPT:]}", message
    )


class TopographError(Exception):
    """Base of all expected failures; ``exit_code`` is what the CLI exits with."""

    exit_code: Exit = Exit.INPUT


class UsageError(TopographError):
    """Flags or option values that contradict each other."""

    exit_code = Exit.USAGE


class InputError(TopographError):
    """Input data (a dump, a snapshot, a JSON response) cannot be understood."""

    exit_code = Exit.INPUT


class ParseError(InputError):
    """A source's text is malformed; the message names the line where possible."""

    def __init__(self, message: str, line: int | None = None, source: str = "") -> None:
        where = f"{source}:{line}: " if line is not None else (f"{source}: " if source else "")
        super().__init__(f"{where}{message}")
        self.line = line
        self.source = source


class CollectError(TopographError):
    """Running a collector command or fetching from a server failed."""

    exit_code = Exit.COLLECT


class ConfigError(TopographError):
    """The configuration is invalid."""

    exit_code = Exit.CONFIG


class RefusedError(TopographError):
    """A write was refused by a safety guard; ``--force`` overrides where it says so."""

    exit_code = Exit.REFUSED


class LockedError(TopographError):
    """Another run holds the output lock."""

    exit_code = Exit.LOCKED


class AuthError(TopographError):
    """Credentials are missing, unsafe, or were refused."""

    exit_code = Exit.AUTH


class OutputError(TopographError):
    """An output file could not be written (missing directory, permissions, full disk)."""

    exit_code = Exit.OUTPUT


class ApplyError(TopographError):
    """Slurm refused a change (``scontrol update`` failed); the message is Slurm's."""

    exit_code = Exit.APPLY


class ReconfigureError(ApplyError):
    """slurmctld did not take the topology just written (``generate --reconfigure``): the
    previous file is restored and the candidate kept beside it; the message carries Slurm's
    reason."""


class DeferredError(TopographError):
    """``generate --reconfigure`` gave up waiting for jobs in their prolog (a reconfigure then
    loses their batch launch on Slurm up to 26.05 with ``PrologFlags=DeferBatch``): the
    previous file is restored and the candidate kept beside it; the next run tries again."""

    exit_code = Exit.DEFERRED
