"""The job record files under ``record_dir`` (docs/record.md): their names, and the job record
encoded and decoded with msgspec. Every file is a JSON object naming its ``format``,
``version`` and ``part``; a reader takes only the version it knows, and says so otherwise."""

from __future__ import annotations

from pathlib import Path

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
