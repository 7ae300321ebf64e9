"""``generate --reconfigure``: make slurmctld run the topology just written, or put the old one
back.

I/O at the edge (``scontrol`` runs, the slurmctld log is read, files are restored through
:mod:`topograph_slurm.output`), kept apart from the CLI so the order of one run stays readable
there. Why each step:

- ``scontrol reconfigure``, never a restart: a restarted slurmctld marks nodes that register
  right after it not responding and requeues their jobs. Since 23.11 a reconfigure starts a new
  slurmctld and keeps the old one (and its config) when the new one fails.
- That failure says little: on 24.11.5 and 26.05.5 ``scontrol reconfigure`` exits 1 with
  ``slurm_reconfigure error: Unspecified error``; the reason (``fatal: Switch (s1) has already
  been defined``) is only in the slurmctld log, which is read when it is readable.
- A reconfigure that succeeds may still run something else than written (24.11 keeps a node it
  does not know in the tree with a warning only), so ``scontrol show topology`` is read back and
  compared as a structure (:mod:`topograph_slurm.slurm.applied`).
- On any failure the previous file goes back (slurmctld still runs it), the candidate stays as
  ``<file>.rejected`` for inspection (when that cannot be written, the restore still comes
  first and the line says why), and the run fails with Slurm's reason.
- Without scontrol on the host, ``generate`` refuses ``--reconfigure`` before it writes
  anything (:meth:`.Scontrol.require`), so no file is written only to be taken back.
- Slurm up to 26.05 with ``PrologFlags=DeferBatch`` loses the batch launch of a job whose
  Prolog runs during a reconfigure (the job stays RUNNING and its script never starts;
  reproduced on 24.11.5). So the reconfigure waits while any job is in its prolog
  (:class:`PrologGuard`), asking every few seconds up to a bound; past it the previous file
  goes back (the candidate kept as ``<file>.deferred``) and the run fails with its own exit
  code, to try again next run: reconfiguring anyway would lose a job, and keeping the new
  file unapplied would let the next reconfigure anyone runs apply it unchecked. The flag is
  read, not assumed: without DeferBatch the launch is not deferred, and a busy cluster
  (some job nearly always in its prolog) would wait every run for nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from topograph_slurm.errors import (
    CollectError,
    DeferredError,
    InputError,
    OutputError,
    ReconfigureError,
)
from topograph_slurm.model.result import NamedTopology
from topograph_slurm.model.slurm_config import reconfigure_risk
from topograph_slurm.output import output_lock, reject, trusted_target
from topograph_slurm.slurm.applied import differences, summary
from topograph_slurm.slurm.jobs import jobs_in_prolog
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.slurm.show_config import show_config
from topograph_slurm.slurm.topology import parse_show_topology
from topograph_slurm.sources.layout import parse_topology, topology_names

#: Suffix of a candidate slurmctld refused, kept beside the restored file.
REJECTED_SUFFIX = ".rejected"
#: Suffix of a candidate not applied because jobs stayed in their prolog past the bound.
DEFERRED_SUFFIX = ".deferred"
#: Seconds between two looks for jobs in their prolog while a reconfigure waits.
POLL_SECONDS = 5.0
#: How much of the slurmctld log a reconfigure may have written that is read for its reason.
LOG_TAIL_BYTES = 256 * 1024


@contextlib.contextmanager
def held(path: Path, lock_timeout: float, state_dir: Path | None) -> Iterator[bytes | None]:
    """The file's bytes before this run (None when there is none), with the output lock held
    until the apply is done, so no other run writes between the write and its restore."""
    target = trusted_target(path)
    with output_lock(target, lock_timeout, state_dir):
        try:
            previous: bytes | None = target.read_bytes()
        except FileNotFoundError:
            previous = None
        except OSError as err:
            raise OutputError(f"cannot read {path}: {err.strerror}") from None
        yield previous


def rejected_path(path: Path) -> Path:
    """Where a refused candidate is kept: ``topology.conf.rejected`` beside the file."""
    return path.with_name(path.name + REJECTED_SUFFIX)


@dataclass(slots=True)
class PrologGuard:
    """The wait before a reconfigure while jobs are in their prolog: at most *bound* seconds,
    looking every *poll*. After :meth:`wait`, *risk* says why it looked (None: not affected,
    nothing asked) and *waited* how long it waited (the metrics' line)."""

    bound: float
    log: Callable[[str], None]
    poll: float = POLL_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    risk: str | None = None
    waited: float | None = None

    def wait(self, scontrol: Scontrol) -> list[str]:
        """Wait until no job is in its prolog; the jobs still there when the bound passed
        (empty: go ahead). A ``scontrol show config`` that fails counts as affected."""
        try:
            self.risk = reconfigure_risk(show_config(scontrol))
        except CollectError as err:
            self.risk = f"PrologFlags unknown ({err})"
        if self.risk is None:
            return []
        start, seen = self.clock(), list[str]()
        while True:
            busy = jobs_in_prolog(scontrol)
            self.waited = self.clock() - start
            if not busy:
                if seen:
                    self.log(f"reconfigure: no job in its prolog after {self.waited:.0f}s")
                return busy
            if self.waited + self.poll > self.bound:
                return busy
            if busy != seen:
                self.log(
                    f"reconfigure deferred: job {', '.join(busy)} in its prolog ({self.risk}: "
                    f"a reconfigure now loses its batch launch); waiting up to {self.bound:g}s"
                )
                seen = busy
            self.sleep(self.poll)


def deferred_path(path: Path) -> Path:
    """Where a candidate not applied is kept: ``topology.conf.deferred`` beside the file."""
    return path.with_name(path.name + DEFERRED_SUFFIX)


def _after_prologs(
    path: Path, previous: bytes | None, scontrol: Scontrol, guard: PrologGuard
) -> None:
    """Return once no job is in its prolog; past the bound (or when the jobs cannot be read)
    put *previous* back, keep the candidate as ``PATH.deferred`` and raise DeferredError."""
    try:
        busy = guard.wait(scontrol)
        reason = ""
        if busy:
            waited = f"{guard.waited or 0:.0f}s of reconfigure_wait {guard.bound:g}s"
            reason = f"job {', '.join(busy)} still in its prolog (waited {waited})"
    except (CollectError, InputError) as err:
        reason = f"cannot tell which jobs are in their prolog: {err}"
    if not reason:
        return
    not_kept = reject(path, previous, deferred_path(path))
    kept = (
        f"the candidate not kept ({not_kept})"
        if not_kept
        else (f"the candidate kept as {deferred_path(path)}")
    )
    raise DeferredError(
        f"reconfigure not run: {reason} ({guard.risk}: a reconfigure now loses its batch "
        f"launch); the previous {path} is restored, {kept}; the next run tries again"
    )


def apply(
    path: Path,
    previous: bytes | None,
    written: str,
    scontrol: Scontrol,
    guard: PrologGuard | None = None,
) -> bool:
    """Reconfigure slurmctld after *written* replaced *previous* at *path* (first waiting
    for jobs in their prolog when *guard* is given) and check that it runs it; False
    (nothing done) when the file did not change. Raises ReconfigureError after putting
    *previous* back, DeferredError when the guard's bound passed."""
    if previous == written.encode("utf-8"):
        return False
    if guard is not None:
        _after_prologs(path, previous, scontrol, guard)
    log = _log_path(scontrol)
    start = _size(log)
    try:
        scontrol.run(["reconfigure"])
    except CollectError as err:
        reason = _reason_from_log(log, start) or f"{err} (see the slurmctld log)"
        raise ReconfigureError(_refused(path, reason, _restore(path, previous))) from None
    found = _running_differences(written, scontrol, str(path))
    if found:
        not_kept = _restore(path, previous)
        with contextlib.suppress(CollectError):  # back to the old file, as slurmctld had it
            scontrol.run(["reconfigure"])
        reason = f"it runs something else: {summary(found)}"
        raise ReconfigureError(_refused(path, reason, not_kept))
    return True


def _refused(path: Path, reason: str, not_kept: str | None) -> str:
    """The one line of a refusal: Slurm's reason, the restore, where the candidate is (or why
    it could not be kept)."""
    kept = f"the candidate kept as {rejected_path(path)}"
    if not_kept:
        kept = f"the candidate not kept ({not_kept})"
    return f"slurmctld did not take {path}: {reason}; the previous file is restored, {kept}"


def _restore(path: Path, previous: bytes | None) -> str | None:
    """Put *previous* back; None when the candidate is kept as ``PATH.rejected``, else why not."""
    return reject(path, previous, rejected_path(path))


def _running_differences(written: str, scontrol: Scontrol, where: str) -> list[str]:
    """How what slurmctld runs differs from *written*: each named topology of a topology.yaml,
    the one of a topology.conf."""
    found = []
    named: list[str | None] = [*topology_names(written, where)]
    for name in named or [None]:
        found_here = differences(parse_topology(written, where, name), _running(scontrol, name))
        found += [f"{name}: {d}" if name else d for d in found_here]
    return found


def _running(scontrol: Scontrol, name: str | None) -> NamedTopology:
    args = ["show", "topology", *([name] if name else [])]
    try:
        text = scontrol.run(args)
        return parse_show_topology(text, name)
    except (CollectError, InputError) as err:  # slurmctld took the file: nothing to restore
        raise CollectError(f"reconfigured, but cannot check what slurmctld runs: {err}") from None


def _log_path(scontrol: Scontrol) -> Path | None:
    """The slurmctld log to read a refusal's reason from, when there is one we know of."""
    if scontrol.log:
        return Path(scontrol.log)
    try:
        found = parse_log_file(scontrol.run(["show", "config"]))
    except CollectError:
        return None
    return Path(found) if found else None


def _size(log: Path | None) -> int:
    try:
        return log.stat().st_size if log else 0
    except OSError:
        return 0


def _reason_from_log(log: Path | None, start: int) -> str | None:
    """Slurm's reason, from what the log gained since *start* (a rotated log: from its top)."""
    if log is None:
        return None
    try:
        with log.open("rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            handle.seek(start if start <= end else 0)
            handle.seek(max(handle.tell(), end - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return reconfigure_reason(text)


#: A slurmctld log line: ``[2026-12-01T12:05:51.916] fatal: …`` (or ``error:``).
_LOG_LINE = re.compile(r"^\[[^\]]*\]\s+(fatal|error):\s+(?:_?[a-z_]+:\s+)?(.*)$")
#: The line a reconfigure attempt starts with (24.11 and 26.05).
RECONFIGURE_START = "Attempting to reconfigure"


def reconfigure_reason(log: str) -> str | None:
    """Why slurmctld refused a reconfigure, from its log since the attempt: the ``fatal:`` line
    and the ``error:`` just before it (``Parsing error at unrecognized key: FooBar; something
    wrong with opening/reading /etc/slurm/topology.conf: Invalid argument``). Recorded on
    24.11.5 and 26.05.5: ``scontrol reconfigure`` itself only says ``Unspecified error``."""
    attempt = log.rfind(RECONFIGURE_START)
    lines = log[attempt if attempt >= 0 else 0 :].splitlines()
    found = [m for m in map(_LOG_LINE.match, lines) if m is not None]
    fatal = next((i for i, m in enumerate(found) if m.group(1) == "fatal"), None)
    if fatal is None:
        return None
    before = found[fatal - 1].group(2) if fatal and found[fatal - 1].group(1) == "error" else None
    return "; ".join(text for text in (before, found[fatal].group(2)) if text)


def parse_log_file(show_config: str) -> str | None:
    """``SlurmctldLogFile`` from ``scontrol show config`` (None when slurmctld logs to syslog
    or the journal: ``(null)``)."""
    match = re.search(r"^SlurmctldLogFile\s*=\s*(\S+)", show_config, re.MULTILINE)
    return match.group(1) if match and match.group(1) != "(null)" else None
