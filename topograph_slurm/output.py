"""Guarded, atomic, only-on-change writes of every file the tool produces.

This is the only module that writes: generate's topology and filters, every command's
``-o``/``--out-dir``/``--metrics`` (:func:`write_output`), trees of files (pools ``--out-dir``,
snapshots: :func:`write_directory`), the kept state and the job records' parts. Every rule
here exists because the files are read by a live ``slurmctld`` and rewritten from cron:

- *Atomic*: a temp file in the same directory is written, fsynced and renamed over the target,
  so Slurm never reads half a file and a crash leaves the old file whole.
- *Only on change*: identical bytes are not rewritten, so the mtime stays put and tools that
  reload Slurm on a changed file (or config repos that commit on change) stay quiet.
- *Shrink guard*: a fabric read during an outage looks like a smaller cluster; replacing a good
  topology with one that lost many nodes would strand them, so that needs ``--force``.
- *Lock*: two overlapping cron runs must not interleave their read-compare-write. Locks live
  in the state directory, never beside the target (sites rsync /etc/slurm).
- *Files, never directories*: ``-o /etc/slurm/`` names a directory; it is refused, not made
  into a file called /etc/slurm.
- *Leftovers*: temp names carry their writer's host and pid, so a later write removes what a
  killed one left, and nothing a live writer (or anyone else) owns.

A device or FIFO given as the target (``-o /dev/null``, ``-o /dev/stdout``) is simply written
to: replacing it by rename would turn ``/dev/null`` into a regular file.
"""

from __future__ import annotations

import contextlib
import ctypes
import difflib
import errno
import fcntl
import hashlib
import math
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from topograph_slurm.errors import LockedError, OutputError, RefusedError
from topograph_slurm.model.summary import FabricSummary
from topograph_slurm.sources.files import open_regular
from topograph_slurm.sources.layout import count_nodes
from topograph_slurm.sources.summary import state_file

if TYPE_CHECKING:
    from topograph_slurm.sources.fabric_index import FabricIndex

NEW_FILE_MODE = 0o644
_LOCK_POLL_SECONDS = 0.05


@dataclass
class WriteOutcome:
    """What a write did; the CLI prints ``diff`` and picks the exit code from ``changed``.

    ``old_nodes``/``new_nodes`` are the node counts the shrink guard compared (0 for files that
    are not topologies, e.g. those written by :func:`write_tree`).
    """

    changed: bool
    written: bool
    diff: str
    path: Path
    old_nodes: int = 0
    new_nodes: int = 0
    #: the file's text before (with a diff only: ``--check`` says why it differs)
    old: str = ""


# --------------------------------------------------------------------------- diff and counting


def unified_diff(old: str, new: str, path: str) -> str:
    """A git-style unified diff (``a/PATH``, ``b/PATH``); empty when the texts are equal.

    A leading ``/`` is dropped from the labels as git does, so ``patch -p1`` applies it.
    Lines without a final newline are marked as diff(1) does, so the output stays a valid patch.
    """
    if old == new:
        return ""
    label = path.lstrip("/")
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{label}",
        tofile=f"b/{label}",
    )
    return "".join(_terminate(line) for line in lines)


def _terminate(line: str) -> str:
    if line.endswith("\n"):
        return line
    return line + "\n\\ No newline at end of file\n"


# --------------------------------------------------------------------------- lock

_held = threading.local()  # per-thread re-entry counts, keyed by lock file path


def lock_path(path: Path, state_dir: Path | None = None) -> Path:
    """The lock file guarding ``path``: ``<name>-<hash>.lock`` in *state_dir*
    (:func:`~topograph_slurm.sources.summary.state_file`); without one (library callers),
    ``.<name>.lock`` beside it."""
    if state_dir is None:
        return path.parent / f".{path.name}.lock"
    return state_file(state_dir, path, ".lock")


@contextlib.contextmanager
def output_lock(path: Path, timeout: float = 30.0, state_dir: Path | None = None) -> Iterator[Path]:
    """Hold an exclusive ``flock`` on the lock file of ``path`` (:func:`lock_path`) for the
    ``with`` body.

    Polls for up to ``timeout`` seconds, then raises :class:`LockedError`. Re-entrant within a
    thread, so a caller may hold the lock around generation and still call
    :func:`write_topology`. The lock file is never deleted: unlinking a flock file lets a
    waiter lock an orphaned inode while a newcomer locks a fresh one.
    """
    lock = lock_path(path, state_dir)
    key = os.path.abspath(lock)
    counts: dict[str, int] = _held.__dict__.setdefault("counts", {})
    if counts.get(key):
        counts[key] += 1
        try:
            yield lock
        finally:
            counts[key] -= 1
        return
    fd = _open_lock(lock)
    try:
        _acquire(fd, lock, timeout)
        counts[key] = 1
        try:
            yield lock
        finally:
            del counts[key]
    finally:
        os.close(fd)  # closing the descriptor releases the flock


_LOCK_FLAGS = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW


def _open_lock(lock: Path) -> int:
    """Open (or create) the lock file without following a link and without blocking: a
    symlink planted there must not make root create its target, a FIFO must not hang the run."""
    try:
        return open_regular(lock, _LOCK_FLAGS, NEW_FILE_MODE)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else _reason(exc)
        raise OutputError(f"cannot open lock file {lock}: {why}") from exc


def _acquire(fd: int, lock: Path, timeout: float) -> None:
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LockedError(
                    f"another topograph-slurm run holds {lock} (waited {timeout:g}s)"
                ) from None
            time.sleep(min(_LOCK_POLL_SECONDS, remaining))


# --------------------------------------------------------------------------- writes


def write_topology(
    path: Path,
    content: str,
    *,
    check: bool = False,
    show_diff: bool = False,
    force: bool = False,
    shrink_limit: float = 0.10,
    lock_timeout: float = 30.0,
    count: Callable[[str], int] = count_nodes,
    state_dir: Path | None = None,
) -> WriteOutcome:
    """Write a topology file atomically, only when it changes, behind the shrink guard.

    ``check`` never writes and takes no lock (a read-only user may check). The diff is
    computed only for ``check``/``show_diff``, since difflib is quadratic on big files.
    Raises :class:`RefusedError` (shrink guard), :class:`LockedError` or :class:`OutputError`.
    """
    if math.isnan(shrink_limit) or shrink_limit < 0:
        raise ValueError(f"shrink_limit must be a fraction >= 0, got {shrink_limit!r}")
    return _write_guarded(
        path,
        content,
        check=check,
        show_diff=show_diff,
        lock_timeout=lock_timeout,
        state_dir=state_dir,
        count=count,
        guard=None if force else (lambda plan: _guard_shrink(path, plan, shrink_limit)),
    )


def write_output(
    path: str | Path,
    content: str,
    *,
    state_dir: Path,
    check: bool = False,
    show_diff: bool = False,
    lock_timeout: float = 30.0,
) -> WriteOutcome:
    """Write one output file of a command (``-o``, ``--out-dir``, ``--metrics``, ``--report``) as
    generate writes its topology, without the shrink guard: a file name, never a directory's
    (``DIR/``, ``/``, ``.``: :func:`file_name`); atomic; only on change; under its lock in
    *state_dir* (which is made when missing, and a lock an older release left beside the
    target is removed); never through a link someone else could have planted. ``check``
    writes nothing and takes no lock."""
    target = file_name(path)
    if not check:
        _take_state(target, state_dir)
    return _write_guarded(
        target,
        content,
        check=check,
        show_diff=show_diff,
        lock_timeout=lock_timeout,
        state_dir=state_dir,
        count=None,
        guard=None,
    )


def _take_state(target: Path, state_dir: Path) -> None:
    """Before a write locked in *state_dir*: make it, and remove the lock file an older
    release left beside *target* (``/etc/slurm/.gres.conf.lock``, copied to every node by a
    site's rsync) when no run holds it."""
    make_state_dir(state_dir)
    _remove_free_lock(lock_path(target))


def file_name(path: str | Path) -> Path:
    """*path* as a Path when it names a file; an OutputError when it names a directory
    (``/etc/slurm/``, ``/``, ``.``, ``..``): ``Path('/etc/slurm/')`` drops the slash, and a
    write would then make a *file* /etc/slurm."""
    text = os.fspath(path)
    if not text or "\0" in text or os.path.basename(text) in ("", ".", ".."):
        raise OutputError(f"cannot write {text!r}: it names a directory, not a file")
    return Path(text)


def _write_guarded(
    path: Path,
    content: str,
    *,
    check: bool,
    show_diff: bool,
    lock_timeout: float,
    state_dir: Path | None,
    count: Callable[[str], int] | None,
    guard: Callable[[WriteOutcome], None] | None,
) -> WriteOutcome:
    """The one read-compare-write: devices written through, ``check`` compared only, else
    under the lock: stale temps removed, compared, *guard* asked, written when changed."""
    if _is_device(path):
        return _write_through(path, content, check)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    if check:
        return _plan(path, content, with_diff=True, count=count)
    target = trusted_target(path)
    if not target.parent.is_dir():
        raise OutputError(f"cannot write {path}: directory {target.parent} does not exist")
    with output_lock(target, lock_timeout, state_dir):
        _remove_stale_temps(target)
        plan = replace(_plan(target, content, with_diff=show_diff, count=count), path=path)
        if not plan.changed:
            return plan
        if guard is not None:
            guard(plan)
        write_file(target, content)
        return replace(plan, written=True)


def write_tree(
    directory: Path,
    files: dict[str, str],
    *,
    check: bool = False,
    show_diff: bool = False,
    lock_timeout: float = 30.0,
    state_dir: Path | None = None,
) -> list[WriteOutcome]:
    """Write generated files (filters, plugin source) into ``directory``, each only on change.

    Same atomic semantics as :func:`write_topology` without the shrink guard; one lock covers
    the whole directory so a reader never sees files from two different runs. Every target is
    read (and its links trusted) before any is written, so a refused one (a directory, a
    planted link) leaves the others as they were, not half the set new. The directory (and
    *state_dir*, where the lock lives) is created when missing (not in ``check`` mode, which
    writes nothing).
    """
    for name in files:
        _check_plain_name(name)
    if check:
        return [_plan(directory / n, files[n], with_diff=True) for n in sorted(files)]
    _make_dir(directory)  # idempotent, so safe before the lock
    if state_dir is not None:
        _take_state(directory, state_dir)
    with output_lock(directory, lock_timeout, state_dir):
        plans = []  # every target read and trusted first: a refused one leaves all unwritten
        for name in sorted(files):
            _remove_stale_temps(trusted_target(directory / name))
            plans.append(_plan(directory / name, files[name], with_diff=show_diff))
        outcomes = []
        for plan, name in zip(plans, sorted(files), strict=True):
            if plan.changed:
                write_file(plan.path, files[name])
                plan = replace(plan, written=True)
            outcomes.append(plan)
        return outcomes


def write_summary(
    topology: Path, summary: FabricSummary, *, state_dir: Path, lock_timeout: float = 30.0
) -> Path:
    """Keep the fabric summary of *topology* in *state_dir*, atomically and under the
    topology's lock. Call it only after the topology was written (or found unchanged): a run
    that was refused or failed must leave the last good state, so the next run still compares
    with, and keeps missing nodes from, the fabric Slurm was given."""
    from topograph_slurm.sources.summary import encode

    with output_lock(trusted_target(topology), lock_timeout, state_dir):
        path = kept_summary_path(topology, state_dir)
        _remove_stale_temps(trusted_target(path))
        write_file(path, encode(summary))
    return path


def write_fabric_index(index: FabricIndex, state_dir: Path, lock_timeout: float = 30.0) -> Path:
    """Keep the fabric *index* in *state_dir* (``sources.fabric_index``), atomically, under
    its own lock (runs for two targets of one source write the same index), mode 0644: the
    hooks that read it may run as another user than the run that keeps it."""
    from topograph_slurm.sources.fabric_index import encode, index_path

    make_state_dir(state_dir)
    path = index_path(state_dir, index.stamp.source)
    with output_lock(trusted_target(path), lock_timeout, state_dir):
        _remove_stale_temps(trusted_target(path))
        write_file(path, encode(index), mode=0o644)
    return path


def kept_summary_path(topology: Path, state_dir: Path) -> Path:
    """Where the summary of *topology* is kept in *state_dir*; OutputError when something
    other than a regular file is there: a FIFO would hang the write, a device would be
    written through."""
    from topograph_slurm.sources.summary import summary_path

    path = summary_path(topology, state_dir)
    if _is_device(trusted_target(path)):
        raise OutputError(f"cannot keep the fabric summary at {path}: not a regular file")
    return path


# --------------------------------------------------------------------------- state directory


def make_state_dir(directory: Path) -> None:
    """Create the state directory when missing (0755 for root, whose state other tools may
    read; 0700 for a user) and check that this run can write there, before anything is
    written: an unwritable one is one OutputError (exit 9), not a topology without its state."""
    mode = 0o755 if os.geteuid() == 0 else 0o700
    try:
        directory.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create state directory {directory}: {_reason(exc)}") from exc
    if not directory.is_dir():
        raise OutputError(f"state directory {directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"state directory {directory} is not writable (--state-dir DIR)")


def move_legacy_state(target: Path, state_dir: Path) -> str | None:
    """Move the state an older release kept beside *target* into *state_dir*, once: the
    summary (renamed when both are on one file system, else written atomically then removed)
    when the state directory has none yet, and the lock file when no run holds it. The one
    log line saying so; None when there was nothing beside *target*."""
    from topograph_slurm.sources.summary import legacy_summary_path, summary_path

    moved = []
    old, new = legacy_summary_path(target), summary_path(target, state_dir)
    if _is_plain_file(old) and not new.exists():
        _move(old, new)
        moved.append(f"{old.name} as {new.name}")
    if _remove_free_lock(lock_path(target)):
        moved.append(f"removed {lock_path(target).name}")
    if not moved:
        return None
    return f"{target}: moved the state kept beside it into {state_dir}: " + "; ".join(moved)


def _is_plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _move(old: Path, new: Path) -> None:
    try:
        os.rename(old, new)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise OutputError(f"cannot move {old} to {new}: {_reason(exc)}") from exc
        write_file(new, _read_existing(old) or b"")
        old.unlink()


def _remove_free_lock(lock: Path) -> bool:
    """Remove an old lock file beside the target unless a run (of an older release) holds it."""
    if not _is_plain_file(lock):
        return False
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _is_device(path: Path) -> bool:
    """Whether *path* is an existing device, FIFO or socket (``/dev/null``, ``/dev/stdout``):
    renaming a temp file over it would replace ``/dev/null`` with a regular file for everyone."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_through(path: Path, content: str, check: bool) -> WriteOutcome:
    """Write to a device or FIFO directly: there is no file to compare, guard or replace."""
    if check:
        raise OutputError(f"cannot check {path}: not a regular file")
    _write_bytes_through(path, content.encode("utf-8"))
    return WriteOutcome(True, True, "", path)


def _write_bytes_through(path: Path, data: bytes) -> None:
    try:
        with path.open("wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc


def _plan(
    path: Path, content: str, *, with_diff: bool, count: Callable[[str], int] | None = None
) -> WriteOutcome:
    """Compare ``content`` with what is on disk, without writing anything."""
    old_bytes = _read_existing(path)
    changed = old_bytes != content.encode("utf-8")
    old = "" if old_bytes is None else old_bytes.decode("utf-8", errors="replace")
    new_nodes = count(content) if count else 0
    old_nodes = 0
    if count and old_bytes:
        old_nodes = count(old) if changed else new_nodes
    diff = unified_diff(old, content, str(path)) if with_diff and changed else ""
    return WriteOutcome(changed, False, diff, path, old_nodes, new_nodes, old if with_diff else "")


def _read_existing(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputError(f"cannot read {path}: {_reason(exc)}") from exc


def _guard_shrink(path: Path, plan: WriteOutcome, limit: float) -> None:
    """Refuse a replacement that loses more than ``limit`` of the nodes (or all of them)."""
    old_nodes, new_nodes = plan.old_nodes, plan.new_nodes
    if old_nodes <= 0 or new_nodes >= old_nodes:
        return
    if new_nodes == 0:
        raise RefusedError(
            f"refusing to replace {path}: the new topology has no nodes "
            f"(the current one has {old_nodes}); use --force"
        )
    drop = (old_nodes - new_nodes) / old_nodes
    if drop > limit:
        raise RefusedError(
            f"refusing to replace {path}: node count would drop from {old_nodes} to "
            f"{new_nodes} (-{drop * 100:.1f}%, limit {limit * 100:g}%); use --force"
        )


def write_file(path: Path, content: str | bytes, *, mode: int | None = None) -> None:
    """Atomically replace ``path`` (its target, if it is a symlink :func:`trusted_target`
    accepts) with ``content``.

    The one primitive every other writer (topology, filters, report, SPANK plugin, snapshot
    files, record parts) goes through. ``mode`` overrides the kept-or-0o644 mode (e.g. 0o755
    for a plugin). Temp files a killed earlier write left in the same directory are removed
    first (:func:`remove_leftovers`). Raises :class:`OutputError` naming ``path``.
    """
    target = trusted_target(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    if _is_device(target):  # --report /dev/stdout: renaming over it would replace the device
        _write_bytes_through(target, data)
        return
    if target.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    remove_leftovers(target.parent)
    try:
        _atomic_replace(target, data, mode)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc


_MAX_LINKS = 40  # as the kernel's own limit on a chain of symbolic links


def trusted_target(path: Path) -> Path:
    """The file *path* names, following symbolic links only where nobody else could have
    planted them: each link (in the directories above the file as well as the file itself),
    and the directory holding it, must belong to root or to the running user, and that
    directory must not be writable by others unless it is sticky. Root writing through a link
    another user left in a shared directory would replace whatever file that user chose.
    Raises :class:`OutputError` saying which link and why.
    """
    pending = list(Path(os.path.abspath(path)).parts[1:])
    current = Path("/")
    links = 0
    while pending:
        candidate = current / pending.pop(0)
        try:
            link = candidate.lstat()
        except FileNotFoundError:
            return candidate.joinpath(*pending)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc
        if not stat.S_ISLNK(link.st_mode):
            current = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OutputError(f"cannot write {path}: too many levels of symbolic links")
        _check_link(path, candidate, link)
        followed = Path(os.path.normpath(current / os.readlink(candidate)))
        pending[:0] = followed.parts[1:]
        current = Path("/")
    return current


def _check_link(path: Path, link_path: Path, link: os.stat_result) -> None:
    trusted = {0, os.geteuid()}
    directory = link_path.parent.stat()
    shared = directory.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
        directory.st_mode & stat.S_ISVTX
    )
    why = (
        "the link belongs to another user"
        if link.st_uid not in trusted
        else "its directory belongs to another user"
        if directory.st_uid not in trusted
        else "its directory is writable by others and not sticky"
        if shared
        else ""
    )
    if why:
        raise OutputError(
            f"refusing to write {path} through the symbolic link {link_path}: {why}, so it "
            "could have been planted; replace the link by the file or fix its ownership"
        )


# --------------------------------------------------------------------------- leftovers

#: How old a temp file or directory of another host's (or a reused pid's) writer must be
#: before a later run removes it: writes take seconds, so an hour-old one is dead.
STALE_AFTER_SECONDS = 3600.0
#: The writer's host (a hash of its name: pids are per host) and pid, in every temp name.
_WRITER = r"(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)"
#: What _atomic_replace's mkstemp names: ``.NAME.HOST-PID.XXXXXXXX.tmp``.
_TEMP_FILE = re.compile(r"\..+\." + _WRITER + r"\.[a-z0-9_]{8}\.tmp")
#: What an older release's mkstemp named (no writer in it): removed only under the lock.
_LEGACY_TEMP = r"\.{name}\.[a-z0-9_]{{8}}\.tmp"
#: What write_directory's mkdtemp names after ``.DIR.``: ``tmp-HOST-PID-XXXXXXXX`` (the
#: new tree) or ``old-HOST-PID-XXXXXXXX`` (the old one, set aside).
_TEMP_DIR = r"(?:tmp|old)-" + _WRITER + r"-[a-z0-9_]{8}"


def _writer_tag() -> str:
    """``HOST-PID`` of this process, as temp names carry it."""
    host = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
    return f"{host}-{os.getpid()}"


def remove_leftovers(directory: Path | int) -> None:
    """Remove the temp files that writes into *directory* (a path, or an open directory's
    fd) were killed inside (kill -9, a power cut): only names of our own pattern, regular
    files (no links) the running user owns, whose writer is provably gone — its pid no longer
    runs on this host, or the file is older than :data:`STALE_AFTER_SECONDS` (another host's,
    or a pid since reused)."""
    dir_fd = directory if isinstance(directory, int) else None
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            found = _TEMP_FILE.fullmatch(entry.name)
            if found and _is_ours(entry) and _writer_gone(found, entry):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path, dir_fd=dir_fd)


def _remove_stale_temps(target: Path) -> None:
    """Under the lock of *target*: also the temp files an older release left for it (their
    names do not say who wrote them; the lock says no live writer of *target* runs)."""
    pattern = re.compile(_LEGACY_TEMP.format(name=re.escape(target.name)))
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            if pattern.fullmatch(entry.name) and _is_ours(entry):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    remove_leftovers(target.parent)


def _remove_stale_dirs(dest: Path) -> None:
    """The temp and set-aside trees a killed :func:`write_directory` of *dest* left beside
    it: directories (not links) the running user owns, whose writer is gone."""
    pattern = re.compile(rf"\.{re.escape(dest.name)}\." + _TEMP_DIR)
    with contextlib.suppress(OSError), os.scandir(dest.parent) as entries:
        for entry in entries:
            found = pattern.fullmatch(entry.name)
            if found and _is_ours(entry, directory=True) and _writer_gone(found, entry):
                shutil.rmtree(entry.path, ignore_errors=True)


def _is_ours(entry: os.DirEntry[str], *, directory: bool = False) -> bool:
    """A regular file (or directory), not a link, that the running user owns."""
    kind = entry.is_dir if directory else entry.is_file
    return kind(follow_symlinks=False) and (
        entry.stat(follow_symlinks=False).st_uid == os.geteuid()
    )


def _writer_gone(found: re.Match[str], entry: os.DirEntry[str]) -> bool:
    """Whether the writer named in a temp name no longer runs: same host and its pid gone,
    or the entry is older than the bound (a host's pid says nothing on another host)."""
    age = time.time() - entry.stat(follow_symlinks=False).st_mtime
    if age > STALE_AFTER_SECONDS:
        return True
    host, pid = _writer_tag().split("-")[0], int(found["pid"])
    return found["host"] == host and pid != os.getpid() and not _running(pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or a pid no kernel has): not provably gone
    return True


def _atomic_replace(target: Path, data: bytes, mode: int | None = None) -> None:
    """Temp file beside ``target``, fsync, rename, fsync the directory; clean up on failure."""
    try:
        old = target.stat()
    except FileNotFoundError:
        old = None
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.{_writer_tag()}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _copy_metadata(handle.fileno(), old, mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _copy_metadata(fd: int, old: os.stat_result | None, mode: int | None) -> None:
    """Keep the old file's mode (new files 0o644) unless *mode* is given, and, when allowed,
    its owner."""
    if mode is None:
        mode = stat.S_IMODE(old.st_mode) if old else NEW_FILE_MODE
    os.fchmod(fd, mode)
    if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        with contextlib.suppress(PermissionError):
            os.fchown(fd, old.st_uid, old.st_gid)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; filesystems that cannot fsync a directory are tolerated."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- directories


def write_directory(
    dest: Path,
    files: Mapping[str, str],
    *,
    replaceable: Callable[[Path], bool],
    what: str = "directory",
    state_dir: Path | None = None,
    lock_timeout: float = 30.0,
) -> Path:
    """Replace the directory *dest* as a whole by one holding *files* (relative path → text).

    The new tree is built in a temp dir beside *dest*, its files written without a sync each
    and made durable together by one sync of their file system (:func:`_sync_tree`: one
    fsync per file cost 15.9 s for 24,578 files), then swapped in. A directory cannot be
    renamed over a non-empty one, so the old one is renamed aside first and removed only after
    the new one is in place (and put back if that fails): readers see the old or the new
    tree, never a half-written one. *dest* must pass *replaceable* — e.g. a snapshot must
    never move ``/etc`` aside. With *state_dir*, one run at a time under *dest*'s lock there;
    the trees a killed run left beside *dest* are removed first (:func:`_remove_stale_dirs`).
    *what* names the tree in errors. Raises :class:`OutputError`.
    """
    given = dest
    if not Path(os.path.abspath(dest)).name:
        raise OutputError(f"refusing to replace {dest} with a {what}")
    dest = trusted_target(Path(os.path.abspath(dest)).parent) / Path(os.path.abspath(dest)).name
    lock: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if state_dir is not None:
        _take_state(dest, state_dir)
        lock = output_lock(dest, lock_timeout, state_dir)
    with lock:
        if not replaceable(dest):
            raise OutputError(
                f"{given} exists and is not a topograph-slurm {what}; not replacing it"
            )
        parent = dest.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _remove_stale_dirs(dest)
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-{_writer_tag()}-", dir=parent))
        except OSError as err:
            raise OutputError(f"cannot create a {what} beside {given}: {_reason(err)}") from None
        try:
            _write_tree_files(tmp, files)
            os.chmod(tmp, 0o755)
            _sync_tree(tmp)
            _swap_in(tmp, dest)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            raise OutputError(f"cannot write {what} {given}: {_reason(err)}") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return dest


_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_tree_files(root: Path, files: Mapping[str, str]) -> None:
    """New files in a fresh temp tree (so O_EXCL, never through a link): no rename needed
    and no sync yet: :func:`_sync_tree` makes them all durable at once."""
    made = {root}
    for rel, text in files.items():
        path = root / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        fd = os.open(path, _NEW_FILE_FLAGS, NEW_FILE_MODE)
        try:
            view = memoryview(text.encode("utf-8"))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def _sync_tree(root: Path) -> None:
    """Every file written under *root* on disk, in one call: ``syncfs`` of its file system
    (Linux), else ``sync``. One sync instead of one fsync per file is what makes a tree of
    tens of thousands of files cost seconds less; the rename that follows publishes it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _syncfs(fd: int) -> int:
    """libc's syncfs(fd); -1 when this libc has none."""
    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return -1
    return int(call(fd))


def _swap_in(tmp: Path, dest: Path) -> None:
    """Rename *tmp* to *dest*, moving an existing *dest* aside first and back on failure."""
    old: Path | None = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-{_writer_tag()}-", dir=dest.parent))
        try:
            os.rename(dest, old / dest.name)
        except OSError:
            shutil.rmtree(old, ignore_errors=True)
            raise
    try:
        os.rename(tmp, dest)
    except OSError:
        if old is not None:
            os.rename(old / dest.name, dest)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    with contextlib.suppress(OSError):  # the swap is done; durability is best effort
        _fsync_dir(dest.parent)


def _make_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create directory {directory}: {_reason(exc)}") from exc


def _check_plain_name(name: str) -> None:
    """Generated file names must stay inside the directory they are written to."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def reject(path: Path, previous: bytes | None, rejected: Path) -> str | None:
    """Put *previous* back at *path* and keep what *path* holds now (a candidate slurmctld
    refused) as *rejected* for inspection, each atomically. Without a previous file the
    candidate is moved aside, so the directory holds what it held before the run.

    The restore comes first: a *rejected* that cannot be written (a directory, a planted link)
    must not leave the refused candidate where slurmctld reads it. Returns None when the
    candidate is kept, else why it is not (the restore itself raises :class:`OutputError`).
    """
    target = trusted_target(path)
    candidate = _read_existing(target)
    if previous is not None:
        write_file(target, previous)
    else:
        _remove(target, path)
    if candidate is None:
        return None
    try:
        write_file(rejected, candidate)
    except OutputError as err:
        return str(err)
    return None


def _remove(target: Path, path: Path) -> None:
    """Remove *target* (what *path* names), durably; gone already is fine."""
    try:
        os.unlink(target)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise OutputError(f"cannot remove {path}: {_reason(exc)}") from exc
    _fsync_dir(target.parent)


# --------------------------------------------------------------------------- the record directory
# The job record's trust model (docs/record.md): the hooks make and write every entry under the
# record root relative to a directory descriptor checked by sources/record.py, never following
# a link and never handing a file to a previous owner. Kept apart from the writers above: the
# record's writers run as root, SlurmUser and the job's user on one shared directory.

_AT_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: The POSIX ACL xattr (acl_ea.h): version 2, entries of tag, permission, id.
_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION, _ACL_UNDEFINED = 2, 0xFFFFFFFF
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20


@dataclass(frozen=True, slots=True)
class Access:
    """Who may read what a hook writes: everyone (``reader`` None, modes 0644/0755), or only
    the owner and the job's user ``reader`` (modes 0600/0700 and a POSIX ACL granting it)."""

    reader: int | None = None

    def mode(self, directory: bool) -> int:
        if self.reader is None:
            return 0o755 if directory else 0o644
        return 0o700 if directory else 0o600


def make_record_root(directory: Path, owner: int | None) -> bool:
    """Create the record root (``hooks install``): a real directory, mode 0755, given to
    *owner* (SlurmUser; None: the running user) when this call made it. An existing one is
    left as it is (``--check`` says what is wrong with it). True when it was made."""
    try:
        directory.mkdir(mode=0o755, parents=True)
    except FileExistsError:
        return False
    except OSError as exc:
        raise OutputError(f"cannot create record_dir {directory}: {_reason(exc)}") from exc
    fd = os.open(directory, _AT_DIR_FLAGS)
    try:
        os.fchmod(fd, 0o755)
        if owner is not None:
            os.fchown(fd, owner, -1)
    finally:
        os.close(fd)
    return True


def make_dir_at(
    parent: int,
    name: str,
    where: str,
    *,
    owners: frozenset[int],
    access: Access = Access(),
    hand_to: int | None = None,
) -> int:
    """The directory *name* in *parent*, made with ``mkdir`` when missing (given to *hand_to*
    only then: a directory this call made, never one found), opened without following a
    link. One that exists must be a real directory owned by one of *owners* (*hand_to*
    counts too), else an OutputError naming *where*: nothing is written into it."""
    made = True
    try:
        os.mkdir(name, access.mode(directory=True), dir_fd=parent)
    except FileExistsError:
        made = False
    except OSError as exc:
        raise OutputError(f"cannot create {where}: {_reason(exc)}") from exc
    try:
        fd = os.open(name, _AT_DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else _reason(exc)
        raise OutputError(
            f"{where} exists and is not a real directory ({why}): not written"
        ) from exc
    try:
        info = os.fstat(fd)
        allowed = owners | ({hand_to} if hand_to is not None else set())
        if made:
            os.fchmod(fd, access.mode(directory=True))
            _grant(fd, access, directory=True)
            if hand_to is not None:
                os.fchown(fd, hand_to, -1)
        elif info.st_uid not in allowed or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise OutputError(
                f"{where} exists, owned by uid {info.st_uid} (mode "
                f"{stat.S_IMODE(info.st_mode):o}), not made by the hooks: not written"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_at(
    directory: int,
    name: str,
    data: bytes,
    where: str,
    access: Access = Access(),
    mode: int | None = None,
) -> None:
    """Atomically replace the file *name* in *directory*: a new temp file (``O_EXCL``, never
    through a link), its mode (*mode*, else from *access*) and ACL from *access*, fsync,
    rename, fsync the directory. The file is always the writer's own: no previous owner is
    copied. Its temp name says who wrote it, so a later write removes one a killed writer
    left (:func:`remove_leftovers`)."""
    _check_plain_name(name)
    temp = f".{name}.{_writer_tag()}.{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temp, flags, 0o600, dir_fd=directory)
    except OSError as exc:
        raise OutputError(f"cannot write {where}: {_reason(exc)}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(fd, access.mode(directory=False) if mode is None else mode)
            _grant(fd, access, directory=False)
            os.fsync(fd)
        os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise OutputError(f"cannot write {where}: {_reason(exc)}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise
    with contextlib.suppress(OSError):  # durability is best effort on file systems without it
        os.fsync(directory)
    remove_leftovers(directory)


def _grant(fd: int, access: Access, directory: bool) -> None:
    """With a private *access*, a POSIX ACL letting its reader read (and enter, for a
    directory) what the owner alone may otherwise; nothing for a public one."""
    if access.reader is None:
        return
    import struct

    owner = 0o7 if directory else 0o6
    read = 0o5 if directory else 0o4
    entries = (
        (_ACL_USER_OBJ, owner, _ACL_UNDEFINED),
        (_ACL_USER, read, access.reader),
        (_ACL_GROUP_OBJ, 0, _ACL_UNDEFINED),
        (_ACL_MASK, read, _ACL_UNDEFINED),
        (_ACL_OTHER, 0, _ACL_UNDEFINED),
    )
    blob = struct.pack("<I", _ACL_VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)
    try:
        os.setxattr(fd, _ACL_XATTR, blob)
    except OSError as exc:
        raise OutputError(
            f"cannot let uid {access.reader} read a private record ({_reason(exc)}): the "
            "record_dir file system needs POSIX ACLs for record_private"
        ) from exc
