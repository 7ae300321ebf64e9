"""Guarded, atomic, only-on-change writes of topology files and generated filter trees.

This is the only module that writes what ``generate`` produces. Every rule here exists because
the files are read by a live ``slurmctld`` and rewritten from cron:

- *Atomic*: a temp file in the same directory is written, fsynced and renamed over the target,
  so Slurm never reads half a file and a crash leaves the old file whole.
- *Only on change*: identical bytes are not rewritten, so the mtime stays put and tools that
  reload Slurm on a changed file (or config repos that commit on change) stay quiet.
- *Shrink guard*: a fabric read during an outage looks like a smaller cluster; replacing a good
  topology with one that lost many nodes would strand them, so that needs ``--force``.
- *Lock*: two overlapping cron runs must not interleave their read-compare-write.

A device or FIFO given as the target (``-o /dev/null``, ``-o /dev/stdout``) is simply written
to: replacing it by rename would turn ``/dev/null`` into a regular file.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import math
import os
import re
import shutil
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
    if _is_device(path):
        return _write_through(path, content, check)
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
        if not force:
            _guard_shrink(path, plan.old_nodes, plan.new_nodes, shrink_limit)
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
    planted link) leaves the others as they were, not half the set new. The directory is
    created when missing (not in ``check`` mode, which writes nothing).
    """
    for name in files:
        _check_plain_name(name)
    if check:
        return [_plan(directory / n, files[n], with_diff=True) for n in sorted(files)]
    _make_dir(directory)  # idempotent, so safe before the lock
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


def make_job_dir(directory: Path, owner: int | None = None) -> None:
    """Create a job record's part directory (0755) when missing; as root, hand a new one to
    *owner* (the job's uid), since each task's binding part is written as the job's user.
    An OutputError naming *directory* when it cannot be made."""
    try:
        directory.mkdir(mode=0o755, parents=True)
    except FileExistsError:
        return
    except OSError as exc:
        raise OutputError(f"cannot create directory {directory}: {_reason(exc)}") from exc
    if owner is not None and os.geteuid() == 0:
        try:
            os.chown(directory, owner, -1)
        except OSError as exc:
            raise OutputError(f"cannot hand {directory} to uid {owner}: {_reason(exc)}") from exc


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


def _guard_shrink(path: Path, old_nodes: int, new_nodes: int, limit: float) -> None:
    """Refuse a replacement that loses more than ``limit`` of the nodes (or all of them)."""
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
    files) goes through. ``mode`` overrides the kept-or-0o644 mode (e.g. 0o755 for a plugin).
    Raises :class:`OutputError` naming ``path``.
    """
    target = trusted_target(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    if _is_device(target):  # --report /dev/stdout: renaming over it would replace the device
        _write_bytes_through(target, data)
        return
    try:
        _atomic_replace(target, data, mode)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc


_MAX_LINKS = 40  # as the kernel's own limit on a chain of symbolic links
_TEMP_NAME = r"\.{name}\.[a-z0-9_]{{8}}\.tmp"  # what _atomic_replace's mkstemp names


def trusted_target(path: Path) -> Path:
    """The file *path* names, following symbolic links only where nobody else could have
    planted them: each link, and the directory holding it, must belong to root or to the
    running user, and that directory must not be writable by others unless it is sticky.
    Root writing through a link another user left in a shared directory would replace
    whatever file that user chose. Raises :class:`OutputError` saying which link and why.
    """
    current = Path(os.path.abspath(path))
    for _ in range(_MAX_LINKS):
        try:
            link = current.lstat()
        except FileNotFoundError:
            return current
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc
        if not stat.S_ISLNK(link.st_mode):
            return current
        _check_link(path, current, link)
        current = Path(os.path.abspath(current.parent / os.readlink(current)))
    raise OutputError(f"cannot write {path}: too many levels of symbolic links")


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


def _remove_stale_temps(target: Path) -> None:
    """Remove temp files of ours for *target* that an earlier run left when it was killed
    inside the write window. Called under the lock, so no live writer owns them."""
    pattern = re.compile(_TEMP_NAME.format(name=re.escape(target.name)))
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            if pattern.fullmatch(entry.name) and _is_ours(entry):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _is_ours(entry: os.DirEntry[str]) -> bool:
    """A regular file (not a link) that the running user owns."""
    return entry.is_file(follow_symlinks=False) and (
        entry.stat(follow_symlinks=False).st_uid == os.geteuid()
    )


def _atomic_replace(target: Path, data: bytes, mode: int | None = None) -> None:
    """Temp file beside ``target``, fsync, rename, fsync the directory; clean up on failure."""
    try:
        old = target.stat()
    except FileNotFoundError:
        old = None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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


def write_directory(
    dest: Path,
    files: Mapping[str, str],
    *,
    replaceable: Callable[[Path], bool],
    what: str = "directory",
) -> Path:
    """Replace the directory *dest* as a whole by one holding *files* (relative path → text).

    The new tree is built in a temp dir beside *dest*, each file fsynced, then swapped in. A
    directory cannot be renamed over a non-empty one, so the old one is renamed aside first and
    removed only after the new one is in place (and put back if that fails): readers see the
    old or the new tree, never a half-written one. *dest* must pass *replaceable* — e.g. a
    snapshot must never move ``/etc`` aside. *what* names the tree in errors. Raises
    :class:`OutputError`.
    """
    if not replaceable(dest):
        raise OutputError(f"{dest} exists and is not a topograph-slurm {what}; not replacing it")
    parent = dest.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=parent))
    except OSError as err:
        raise OutputError(f"cannot create a {what} beside {dest}: {_reason(err)}") from None
    try:
        for rel, text in files.items():
            _write_synced(tmp / rel, text)
        os.chmod(tmp, 0o755)
        _swap_in(tmp, dest)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"cannot write {what} {dest}: {_reason(err)}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _write_synced(path: Path, text: str) -> None:
    """A new file in a temp tree: no rename needed, only the bytes on disk before the swap."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _swap_in(tmp: Path, dest: Path) -> None:
    """Rename *tmp* to *dest*, moving an existing *dest* aside first and back on failure."""
    old: Path | None = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
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
