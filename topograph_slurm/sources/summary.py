"""The kept fabric summary file: its name in the state directory, its format, reading it back.

``generate -o /etc/slurm/topology.conf`` keeps
``/var/lib/topograph-slurm/topology.conf-<hash>.fabric.json`` (releases before the state
directory kept ``/etc/slurm/.topology.conf.fabric.json``; the first run moves it): one
JSON object ``{"format": "topograph-slurm-fabric-summary", "version": 1, "summary": {…}}`` with
the :class:`~topograph_slurm.model.summary.FabricSummary` of the fabric that run used. The
reader owns the format (the writer imports :func:`encode` from here): a file of another format,
of a newer version or of the wrong shape is one :class:`InputError` naming the file and why,
decoded by msgspec straight into the model's dataclasses (a 16,384-node summary is ~10 MB).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from topograph_slurm.errors import InputError
from topograph_slurm.model.summary import FabricSummary
from topograph_slurm.sources.files import check_header, read_kept

SUMMARY_FORMAT = "topograph-slurm-fabric-summary"
SUMMARY_VERSION = 1
#: The largest kept summary read: 25 times the ~10 MB of a 16,384-node fabric's.
MAX_SUMMARY_BYTES = 256 << 20


class _Header(msgspec.Struct):
    format: str = ""
    version: int = 0


class _File(msgspec.Struct):
    format: str
    version: int
    summary: FabricSummary


SUMMARY_SUFFIX = ".fabric.json"
#: How many hex digits of the target's path hash name its state files.
_STATE_HASH_DIGITS = 12


def state_file(directory: Path, target: Path, suffix: str) -> Path:
    """The state file of *target* in *directory*: ``<name>-<hash><suffix>``, the hash (12 hex
    digits of SHA-256) over the target's real absolute path, so two targets of one name
    (/etc/slurm/topology.conf, /srv/test/topology.conf) never share state, a name of any
    length fits, and a symbolic link to the target finds the target's state."""
    real = os.path.realpath(target)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:_STATE_HASH_DIGITS]
    return directory / f"{Path(real).name}-{digest}{suffix}"


def summary_path(output: Path | str, state_dir: Path) -> Path:
    """Where ``generate -o OUTPUT`` keeps its fabric summary: ``<name>-<hash>.fabric.json``
    in the state directory (:func:`state_file`)."""
    return state_file(state_dir, Path(output), SUMMARY_SUFFIX)


def legacy_summary_path(output: Path | str) -> Path:
    """Where releases before the state directory kept it: ``.<name>.fabric.json`` beside."""
    path = Path(output)
    return path.parent / f".{path.name}{SUMMARY_SUFFIX}"


def encode(summary: FabricSummary) -> bytes:
    """The file's bytes: the same summary always gives the same bytes."""
    document = _File(SUMMARY_FORMAT, SUMMARY_VERSION, summary)
    return msgspec.json.format(msgspec.json.encode(document), indent=1) + b"\n"


def looks_like_summary(data: bytes) -> bool:
    """Whether *data* claims to be a summary (then :func:`decode` judges the rest)."""
    if not data.lstrip().startswith(b"{"):
        return False
    try:
        header = msgspec.json.decode(data, type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False
    return header.format == SUMMARY_FORMAT


def decode(data: bytes, where: str) -> FabricSummary:
    """A summary file's content; InputError naming *where* when it is not one this release
    reads (another format, a newer version, a wrong shape)."""
    try:
        header = msgspec.json.decode(data, type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: not a fabric summary ({err})") from None
    except RecursionError:  # msgspec gives up on deep nesting even for the header alone
        raise InputError(f"{where}: not a fabric summary (nested too deeply)") from None
    check_header(
        (header.format, header.version), (SUMMARY_FORMAT, SUMMARY_VERSION), "fabric summary", where
    )
    try:
        return msgspec.json.decode(data, type=_File).summary
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: invalid fabric summary: {err}") from None
    except RecursionError:
        raise InputError(f"{where}: invalid fabric summary: nested too deeply") from None


def load_summary(path: Path) -> FabricSummary | None:
    """The summary kept at *path*; None when there is none (the first run). A FIFO, a device
    or a file past the size cap there is an InputError, not a hang or a run out of memory."""
    data = read_kept(path, MAX_SUMMARY_BYTES)
    return None if data is None else decode(data, str(path))
