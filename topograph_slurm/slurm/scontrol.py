"""The one way the package runs ``scontrol``: a command, its timeout, one error wording.

Every reader (:mod:`.nodes`, :mod:`.jobs`, :mod:`.topology`, :mod:`.release`) and every
command that changes slurmctld (:mod:`.apply`, :mod:`.reconfigure`) goes through
:class:`Scontrol`, built from the config's ``scontrol``/``scontrol_timeout``
(:meth:`Scontrol.from_settings`), so a site's wrapper and timeout hold for every command.
With a saved state (config ``slurm_state``, ``--slurm-state DIR``) the same reads are answered
from its files and every change is refused (:mod:`.saved`): no command needs a second path.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from topograph_slurm.errors import CollectError
from topograph_slurm.model.numbers import natural
from topograph_slurm.slurm import saved as saved_state

if TYPE_CHECKING:
    from topograph_slurm.config import Settings


class NotInstalled(CollectError):
    """The scontrol command does not exist here (no slurm-client)."""


@dataclass(frozen=True, slots=True)
class Scontrol:
    """How to reach slurmctld: the ``scontrol`` command, its timeout, and the slurmctld log
    (None: ``SlurmctldLogFile`` of ``scontrol show config``); or, *saved*, a saved state
    directory that answers the reads instead (:mod:`.saved`)."""

    binary: str = "scontrol"
    timeout: float = 120.0
    log: str | None = None
    saved: Path | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Scontrol:
        saved = Path(settings.slurm_state) if settings.slurm_state else None
        return cls(settings.scontrol, settings.scontrol_timeout, settings.slurmctld_log, saved)

    def require(self, why: str, change: str = "scontrol") -> None:
        """Refuse up front, before anything is written, when the command is not there (not
        on PATH, or a configured path that is not an executable), or Slurm is a saved state
        that takes no *change*: *why* says what needs it."""
        if self.saved is not None:
            raise saved_state.Unchanged(f"{change}: {saved_state.refusal(self.saved)}")
        if shutil.which(self.binary) is None:
            raise NotInstalled(f"{self.binary} not found: {why}")

    def run(self, args: Sequence[str], what: str | None = None) -> str:
        """stdout of ``scontrol <args>`` as text (a byte that is not UTF-8 read as U+FFFD:
        Slurm copies bytes of names and reasons unchanged); see :meth:`output`."""
        return self.output(args, what).decode("utf-8", errors="replace")

    def output(self, args: Sequence[str], what: str | None = None) -> bytes:
        """stdout of ``scontrol <args>`` as bytes (what the ``--json`` readers decode); a
        collect error of one line otherwise: *what* (the command and its first two
        arguments) failed, with its exit code and last stderr line. From a saved state: its
        file's bytes (:func:`.saved.answer`)."""
        if self.saved is not None:
            return saved_state.answer(self.saved, args)
        what = what or " ".join([self.binary, *args[:2]])
        try:
            code, stdout, stderr = _capture([self.binary, *args], self.timeout)
        except FileNotFoundError:
            raise NotInstalled(
                f"{self.binary} not found: install slurm-client or pass a hostlist"
            ) from None
        except subprocess.TimeoutExpired:
            raise CollectError(f"{what} timed out after {self.timeout:g}s") from None
        if code != 0:
            said = (stderr.strip() or stdout.strip()).decode(errors="replace")
            last = said.splitlines()[-1:] or ["no error output"]
            raise CollectError(f"{what} failed (exit {code}): {last[0]}")
        return stdout


def _capture(argv: list[str], timeout: float) -> tuple[int, bytes, bytes]:
    """Run *argv*: its exit code, stdout and stderr. Each pipe is read to its end by a thread
    of its own, in one blocking read into a growing buffer: ``subprocess.run``'s timeout loop
    reads 32 kB per ``select`` and spends twice the CPU on a 100 MB ``show jobs --json`` (0.21
    against 0.10 s). After *timeout* the command is killed and ``TimeoutExpired`` raised at
    once, even while something it started still holds its pipes (their readers are left)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    read: dict[int, bytes] = {}
    readers = [
        threading.Thread(target=_read_to_end, args=(pipe, i, read), daemon=True)
        for i, pipe in enumerate((proc.stdout, proc.stderr))
    ]
    deadline = time.monotonic() + timeout
    try:
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))
        if any(reader.is_alive() for reader in readers):
            raise subprocess.TimeoutExpired(argv, timeout)
        proc.wait(max(0.0, deadline - time.monotonic()))
    except BaseException:  # the timeout, or ^C: the command does not outlive its caller
        proc.kill()
        proc.wait()
        raise
    return proc.returncode, read[0], read[1]


def _read_to_end(pipe: IO[bytes] | None, key: int, read: dict[int, bytes]) -> None:
    assert pipe is not None
    with pipe:
        read[key] = pipe.read()


def whole(value: object) -> int:
    """A whole non-negative number of ``--json`` output (``5``, ``5.0`` or ``"5"``); a
    ValueError for anything else: ``int()`` would crash on ``Infinity`` (``1e400`` decodes to
    it) and read ``True``, ``"٤"`` or ``"3_3"`` as numbers."""
    if isinstance(value, float) and value.is_integer():  # False for inf and nan
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    number = natural(value) if isinstance(value, str) else None
    if number is None:
        raise ValueError(f"expected a whole number, got {value!r}")
    return number
