"""The job record files under ``record_dir`` (docs/record.md): their names, and the job record
encoded and decoded with msgspec. Every file is a JSON object naming its ``format``,
``version`` and ``part``; a reader takes only the version it knows, and says so otherwise."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import msgspec

from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.record import RECORD_FORMAT, RECORD_VERSION, JobRecord

#: The most bytes a record may hold: a 16k-node job's record is a few MiB.
MAX_RECORD_BYTES = 64 << 20


class _Head(msgspec.Struct):
    """What every record file starts by claiming."""

    format: str = ""
    version: object = None
    part: str = ""


#: The most bytes a job's export file may hold: a dozen short lines and the unit rows (61 KB
#: at 16,384 nodes in blocks of 18).
MAX_EXPORTS_BYTES = 256 << 10
EXPORTS_PART = "exports"


class JobExports(msgspec.Struct, forbid_unknown_fields=False):
    """``job-<ID>.exports``: the variables every task of the job gets, as (name, value) pairs,
    so a task reads a few hundred bytes, not the whole record (whose size grows with nodes);
    and each node's own units as (hostlist, block, leaf, NVLink domain) rows, one per distinct
    triple, so the file grows with the job's units, not its nodes."""

    job_id: str
    variables: list[tuple[str, str]]
    units: list[tuple[str, str, str, str]] = msgspec.field(default_factory=list)
    format: str = RECORD_FORMAT
    version: int = RECORD_VERSION
    part: str = EXPORTS_PART


def encode_exports(exports: JobExports) -> bytes:
    return msgspec.json.encode(exports) + b"\n"


def read_exports(root: RecordRoot, job_id: str) -> tuple[Path, JobExports]:
    """The export file of *job_id* under *root*, trusted only when root or the record's
    writer wrote it; an InputError otherwise (missing, another owner, malformed)."""
    name = exports_name(job_id)
    where = str(root.path / name)
    data = read_at(root.fd, name, MAX_EXPORTS_BYTES, root.writers, where)
    try:
        head = msgspec.json.decode(data, type=_Head)
        check_head(head.format, head.version, head.part, EXPORTS_PART, where)
        exports = msgspec.json.decode(data, type=JobExports)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: not a job's exports ({err})") from None
    if exports.job_id != job_id:
        raise InputError(f"{where}: the exports of job {exports.job_id!r}, not {job_id}")
    return root.path / f"job-{job_id}.json", exports


def check_job_id(job_id: str, where: str = "job id") -> str:
    """*job_id* when it is ASCII digits (a Slurm job id as the hooks see it), else a usage
    error: the id names a file, so nothing else may reach the path."""
    if natural(job_id) is None or job_id != job_id.strip():
        raise UsageError(f"{where} {job_id!r} is not a Slurm job id (ASCII digits such as 1234)")
    return job_id


def record_file(directory: Path, job_id: str) -> Path:
    """``<record_dir>/job-<JOBID>.json``."""
    return directory / f"job-{check_job_id(job_id)}.json"


def parts_dir(record: Path) -> Path:
    """``job-<JOBID>.d/`` beside the job record *record*: the node and task parts."""
    return record.with_suffix(".d")


def exports_name(job_id: str) -> str:
    """``job-<JOBID>.exports``: the small file ``record task`` reads (the export lines),
    written by ``record start`` beside the record."""
    return f"job-{check_job_id(job_id)}.exports"


#: The task parts' directory inside ``job-<ID>.d/``: the only place the job's user writes.
TASKS_DIR = "tasks"


# --------------------------------------------------------------------------- the trust model
# docs/record.md, "Trust model": the record root belongs to root or the record's writer and
# is writable by nobody else; every entry under it is opened relative to a checked directory
# descriptor without following links, and trusted only when its owner is one of the writers.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(slots=True)
class RecordRoot:
    """The record root opened and checked: its descriptor, and the uids whose files under it
    are trusted (root and the root's owner: SlurmUser, who writes the job records)."""

    path: Path
    fd: int
    writers: frozenset[int]

    def __enter__(self) -> RecordRoot:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        os.close(self.fd)


def open_root(directory: Path) -> RecordRoot:
    """*directory* (``record_dir``) opened as the record root: a real directory (not a link),
    writable by its owner only. An InputError naming it otherwise: a root others may write
    lets any user plant what root later reads or writes through."""
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as err:
        raise InputError(f"record_dir {directory}: {_why(err)}") from None
    info = os.fstat(fd)
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise InputError(
            f"record_dir {directory} is writable by others (mode {stat.S_IMODE(info.st_mode):o}):"
            " not trusted; make it owned by root or SlurmUser, mode 0755 "
            "(topograph-slurm hooks install)"
        )
    return RecordRoot(directory, fd, frozenset({0, info.st_uid}))


def open_dir_at(parent: int, name: str, owners: frozenset[int] | None, where: str) -> int:
    """The directory *name* in the directory *parent*, opened without following a link; an
    InputError naming *where* unless it is a real directory owned by one of *owners* (None:
    anyone's, for what is only shown) and writable by its owner only."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as err:
        raise InputError(f"{where}: {_why(err)}") from None
    info = os.fstat(fd)
    trouble = _untrusted(info, owners) or (
        "writable by others" if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) else ""
    )
    if trouble:
        os.close(fd)
        raise InputError(f"{where}: {trouble}: not trusted")
    return fd


def read_at(
    directory: int, name: str, limit: int, owners: frozenset[int] | None, where: str
) -> bytes:
    """The bytes of the file *name* in the directory *directory*, read without following a
    link or blocking on a FIFO; an InputError naming *where* unless it is a regular file with
    one link, owned by one of *owners* (None: anyone's), of at most *limit* bytes."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=directory)
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except OSError as err:
        raise InputError(f"{where}: {_why(err)}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        trouble = _untrusted(info, owners) or (
            "not a regular file"
            if not stat.S_ISREG(info.st_mode)
            else "a hard link"
            if info.st_nlink != 1
            else ""
        )
        if trouble:
            raise InputError(f"{where}: {trouble}: not trusted")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{where}: larger than {limit >> 20} MiB")
    return data


def _untrusted(info: os.stat_result, owners: frozenset[int] | None) -> str:
    if owners is None or info.st_uid in owners:
        return ""
    return f"owned by uid {info.st_uid}, not by root or the record's writer"


def _why(err: OSError) -> str:
    """An open's failure in words; a link or a non-directory where one is expected named."""
    if err.errno == errno.ELOOP:
        return "a symbolic link"
    if err.errno == errno.ENOTDIR:
        return "not a directory"
    return err.strerror or str(err)


def check_head(fmt: object, version: object, part: object, wanted: str | None, where: str) -> None:
    """The claim every record file starts with (format, version, part) checked: an InputError
    naming *where* for another format or version, or a part other than *wanted* (any: None)."""
    if fmt != RECORD_FORMAT:
        raise InputError(f"{where}: not a {RECORD_FORMAT} file")
    if version != RECORD_VERSION:
        raise InputError(f"{where}: unsupported record version {version!r}")
    if wanted is not None and part != wanted:
        raise InputError(f"{where}: a {part!r} record, not a {wanted!r} one")


def encode(record: JobRecord) -> bytes:
    """The record as indented JSON, a newline at the end."""
    return msgspec.json.format(msgspec.json.encode(record), indent=1) + b"\n"


def decode(data: bytes, where: str) -> JobRecord:
    """A ``part: job`` record from *data*; an InputError naming *where* when it is not JSON,
    not a record, another part or version, or a field has the wrong shape."""
    try:
        head = msgspec.json.decode(data, type=_Head)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: not a job record ({err})") from None
    check_head(head.format, head.version, head.part, "job", where)
    try:
        return msgspec.json.decode(data, type=JobRecord)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: malformed job record ({err})") from None


def read_job_record(root: RecordRoot, job_id: str) -> tuple[Path, JobRecord]:
    """The job record of *job_id* under the opened *root*, trusted only when root or the
    record's writer wrote it: an InputError otherwise, as for a missing or malformed one."""
    name = f"job-{check_job_id(job_id)}.json"
    path = root.path / name
    return path, decode(
        read_at(root.fd, name, MAX_RECORD_BYTES, root.writers, str(path)), str(path)
    )


def read_record(path: Path) -> JobRecord:
    """The job record in *path*: an InputError when it is missing, unreadable or malformed."""
    from topograph_slurm.sources.files import read_regular

    try:
        data = read_regular(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        raise InputError(f"no job record {path}") from None
    except OSError as err:
        raise InputError(f"cannot read job record {path}: {err.strerror}") from None
    return decode(data, str(path))
