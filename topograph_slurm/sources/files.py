"""Opening the files the tool keeps beside its output (the lock, the kept summary) safely.

A FIFO planted at such a path would hang the run in ``open()`` (no writer ever comes) and a
link to ``/dev/zero`` would read until memory runs out, so these files are opened without
blocking, must be regular files, and are read only up to a size cap.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


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
