"""Opening the files the tool keeps (the lock, the kept summary, the kept index) safely, and
the one rule for their format and version headers.

A FIFO planted at such a path would hang the run in ``open()`` (no writer ever comes) and a
link to ``/dev/zero`` would read until memory runs out, so these files are opened without
blocking, must be regular files, and are read only up to a size cap.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from topograph_slurm.errors import InputError


def open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """*path* opened with *flags* plus ``O_NONBLOCK`` (a FIFO must not hang the open); an
    OSError whose strerror says so when it is no regular file (a FIFO, a device, a socket)."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file *path*, at most *limit* of them; an OSError (strerror
    says why) when it is no regular file or holds more."""
    fd = open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // (1 << 20)} MiB", str(path))
    return data


def check_header(found: tuple[str, int], wanted: tuple[str, int], what: str, where: str) -> None:
    """An InputError naming *where* when a kept file's (format, version) is not *wanted*:
    another format is not a *what*; another version is one this release does not read."""
    if found[0] != wanted[0]:
        raise InputError(f"{where}: not a {what} (format {found[0]!r})")
    if found[1] != wanted[1]:
        raise InputError(
            f"{where}: {what} version {found[1]}; this release reads version {wanted[1]}"
        )


def read_kept(path: Path, limit: int) -> bytes | None:
    """A kept file's bytes (:func:`read_regular`); None when there is none yet, an InputError
    when it cannot be read (a FIFO, a device, a file past *limit*)."""
    try:
        return read_regular(path, limit)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None
