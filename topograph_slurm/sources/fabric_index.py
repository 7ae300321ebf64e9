"""The kept fabric index: what the job-scoped commands read of an analysed fabric, kept in
the state directory so that a job's ``explain``, ``order``, ``pools``, ``experts``,
``record start`` or ``occupancy`` looks its nodes up instead of analysing the whole fabric
again (docs/keep-true.md, "The kept fabric index").

``generate -o FILE`` keeps ``<state_dir>/fabric-<hash>.index`` for its fabric source (the hash
over the source's identity: a dump's real path, a simulation's spec, UFM's URL), written after
the run's other state. The file is msgpack: an envelope
``{format, version, sha256, body}`` whose ``body`` is the msgpack of :class:`FabricIndex` and
whose ``sha256`` is the body's, so a torn or altered file is refused, not misread. The
:class:`Stamp` inside says what the source was when it was analysed; the reader
(``app/fabric.read_kept``) compares it with the source now. This module owns the format and
its version rule: a file of another format, another version, a wrong checksum or a wrong
shape is one :class:`InputError` naming the file and why.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from topograph_slurm.errors import InputError
from topograph_slurm.sources.files import check_header, read_kept

INDEX_FORMAT = "topograph-slurm-fabric-index"
INDEX_VERSION = 1
INDEX_SUFFIX = ".index"
#: The largest kept index read: ~25 times a 16,384-node × 8-rail fabric's.
MAX_INDEX_BYTES = 128 << 20
#: How many hex digits of the source's identity hash name its index file.
_HASH_DIGITS = 12


class Stamp(msgspec.Struct, frozen=True, array_like=True):
    """What the source was when it was analysed: its identity, the file's
    ``(device, inode, size, mtime_ns, ctime_ns)`` for a file source (empty for a simulation
    or a live source), a digest of the settings the analysis depends on, the release that
    analysed it, and when (seconds since the epoch)."""

    source: str
    file: tuple[int, ...]
    settings: str
    release: str
    analysed: float


class KeptFinding(msgspec.Struct, frozen=True, array_like=True):
    """A problem finding on a node, leaf or block, as the paths' facts hold it."""

    kind: str
    subject: str
    message: str
    level: str
    nodes: tuple[str, ...] = ()


class FabricIndex(msgspec.Struct, array_like=True):
    """Every node's units (indexes into ``units``, finest first), the levels, each unit's
    node count, the rates (indexes into ``rates``) of every node's rails and every leaf's
    uplinks, the problems on nodes and units, whether the domain level is NVLink, and GPUs
    per node as the source says (0: it does not)."""

    stamp: Stamp
    source: str
    levels: list[str]
    units: list[tuple[str, str]]
    unit_sizes: list[int]
    nodes: list[str]
    places: list[list[int]]
    rates: list[tuple[str, str]]
    rails: dict[str, list[int]]
    uplinks: dict[str, list[int]]
    problems: list[KeptFinding]
    nvlink_domains: bool
    gpus_per_node: int


class _Envelope(msgspec.Struct, array_like=True):
    format: str
    version: int
    sha256: str
    body: bytes


class _Header(msgspec.Struct, array_like=True):
    format: str
    version: int


def index_path(state_dir: Path, source: str) -> Path:
    """Where the index of the fabric source *source* (its identity) is kept."""
    digest = hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest()
    return state_dir / f"fabric-{digest[:_HASH_DIGITS]}{INDEX_SUFFIX}"


def encode(index: FabricIndex) -> bytes:
    """The file's bytes: the same index always gives the same bytes."""
    body = msgspec.msgpack.encode(index)
    digest = hashlib.sha256(body).hexdigest()
    return msgspec.msgpack.encode(_Envelope(INDEX_FORMAT, INDEX_VERSION, digest, body))


def decode(data: bytes, where: str) -> FabricIndex:
    """An index file's content; InputError naming *where* when it is not one this release
    reads (another format or version, a checksum that does not match, a wrong shape)."""
    try:
        header = msgspec.msgpack.decode(data, type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: not a fabric index ({err})") from None
    check_header(
        (header.format, header.version), (INDEX_FORMAT, INDEX_VERSION), "fabric index", where
    )
    try:
        envelope = msgspec.msgpack.decode(data, type=_Envelope)
        if hashlib.sha256(envelope.body).hexdigest() != envelope.sha256:
            raise InputError(f"{where}: fabric index checksum does not match (damaged)")
        return msgspec.msgpack.decode(envelope.body, type=FabricIndex)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise InputError(f"{where}: invalid fabric index: {err}") from None


def load_index(path: Path) -> FabricIndex | None:
    """The index kept at *path*; None when there is none. A FIFO, a device, a file past the
    size cap or one that does not decode is an InputError."""
    data = read_kept(path, MAX_INDEX_BYTES)
    return None if data is None else decode(data, str(path))
