"""A collected snapshot directory, read back: raw nvidia-smi texts and collection findings →
per-node GPU fabric and topology. The format's reader owns the format, so its names (format,
version, file layout, command keys) are defined here once and the writer
(``topograph_slurm.collect``) imports them; its finding kinds (``collect-*``) are in the
catalogue, ``model/findings.py``.

Layout of a snapshot directory::

    DIR/manifest.json                    format, version, created, via, srun_mode, nodes,
                                         commands, and one result per node and command:
                                         node, command, argv, exit_code, duration (the node's
                                         run), timestamp, error, timed_out, stderr_tail, file
    DIR/nodes/<node>/<command-key>.txt   raw stdout of each command that succeeded
    DIR/fabric/ibnetdiscover.txt         with --ibnetdiscover-on NODE
    DIR/ufm/*.json                       with --ufm URL (sources/ufm.py reads them)
    DIR/bench.json                       with `bench --record DIR`: the benchmark plan, command
                                         lines, timings, versions, results per run, per-level
                                         medians and findings (its own format and version)
    DIR/facts.json                       written by `collect` after the snapshot: every node
                                         read without a finding, parsed (GPUs, fabric source,
                                         product names, its topo -m by index into the distinct
                                         texts), with the size and mtime of each file it was
                                         read from (its own format and version)

The version rule: ``SNAPSHOT_VERSION`` changes only when a file that exists changes meaning, so
an older reader would misread it. A new optional file beside the manifest (``bench.json``) does
not bump it: readers ignore files they do not know, and a file that has a format of its own
(``BENCH_FORMAT``/``BENCH_VERSION``) is checked by its reader here.

The facts file is a cache: a reader takes a node from it only when every file the node's
manifest entries name still has the size and mtime recorded there, and otherwise (a file
changed, the file absent, of another version or unreadable) parses the node's texts as
before. A 16,384-node snapshot holds ~1.4 GB of ``nvidia-smi -q`` text: parsed once, when
collected, not by every command that reads the snapshot.

A node that failed (non-zero exit, timeout, unreachable, garbage) is in the manifest with its
exit code, error and stderr tail; reading turns it into a finding, so a node that could not be
read is reported rather than silently missing. Deciding what the GPUs mean for the topology
is not done here (see ``topology.clique`` and ``topology.nvlink``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from topograph_slurm.errors import InputError, ParseError
from topograph_slurm.model import names
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuFabric, GpuTopology
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Finding, decode_finding
from topograph_slurm.sources.gpu_topology import parse_gpu_topology
from topograph_slurm.sources.nvidia_smi import (
    CLUSTER_UUID,
    parse_fabric_output,
)
from topograph_slurm.sources.rocm_smi import parse_showproduct

SNAPSHOT_FORMAT = "topograph-slurm-snapshot"
SNAPSHOT_VERSION = 1
MANIFEST = "manifest.json"
NODES_DIR = "nodes"
FABRIC_DIR = "fabric"
IBNETDISCOVER_KEY = "ibnetdiscover"
IBNETDISCOVER_FILE = "ibnetdiscover.txt"

#: Command keys of the node outputs the reader parses (file ``nodes/<node>/<key>.txt``).
KEY_QUERY = "nvidia-smi-query"
KEY_Q = "nvidia-smi-q"
KEY_TOPO = "nvidia-smi-topo"
#: AMD nodes: ``rocm-smi --showtopo``, read into the same GpuTopology as ``topo -m``.
KEY_ROCM_TOPO = "rocm-smi-topo"
#: AMD nodes: ``rocm-smi --showproduct``, each GPU's card series (gres' Type=).
KEY_ROCM_PRODUCT = "rocm-smi-product"
#: The node outputs that give a node's GPU topology, the first present one read.
TOPOLOGY_KEYS = (KEY_TOPO, KEY_ROCM_TOPO)

FACTS_FILE = "facts.json"
FACTS_FORMAT = "topograph-slurm-snapshot-facts"
FACTS_VERSION = 1

BENCH_FILE = "bench.json"
BENCH_FORMAT = "topograph-slurm-bench"
BENCH_VERSION = 1


def check_node_name(node: str) -> str:
    """Reject names that cannot be a Slurm node or a safe directory name (node names become
    directories of the snapshot)."""
    names.check([node], "node")
    return node


@dataclass(slots=True)
class NodeSnapshot:
    """One node's parsed outputs. ``gpus`` is None when no fabric output could be read;
    ``fabric_source`` names the command it came from (``-q`` is preferred: it has Health);
    ``products`` is each GPU's ``Product Name`` from ``-q``, by index. The texts themselves
    are not kept: a 16,384-node snapshot holds ~1.4 GB of them."""

    name: str
    gpus: list[GpuFabric] | None = None
    fabric_source: str | None = None
    topology: GpuTopology | None = None
    products: dict[int, str] = field(default_factory=dict)


@dataclass(slots=True)
class Snapshot:
    """A collected snapshot, parsed. ``findings`` hold every per-node collection or parse
    problem, so a node that could not be read is reported rather than silently missing."""

    path: Path
    created: str
    via: str
    nodes: dict[str, NodeSnapshot]
    manifest: dict[str, Any]
    ibnetdiscover: str | None = None
    findings: list[Finding] = field(default_factory=list)
    bench: BenchRecord | None = None

    @property
    def gpus(self) -> dict[str, list[GpuFabric]]:
        """The GPUs of every node whose fabric output could be read, by node."""
        return {name: node.gpus for name, node in self.nodes.items() if node.gpus is not None}

    @property
    def topologies(self) -> dict[str, GpuTopology]:
        """The ``nvidia-smi topo -m`` of every node that has a readable one, by node."""
        return {name: node.topology for name, node in self.nodes.items() if node.topology}

    @property
    def unread_nodes(self) -> list[str]:
        """Nodes in the manifest without readable fabric output."""
        return [name for name, node in self.nodes.items() if node.gpus is None]


@dataclass(slots=True)
class BenchRecord:
    """A recorded ``bench`` run: its findings (what ``health`` and ``diff`` read), each
    level's median busbw (the baseline of the next run's drift check), and the whole record."""

    path: Path
    created: str
    findings: list[Finding]
    medians: dict[str, float]
    data: dict[str, Any]


def _read_json(path: Path, missing: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(missing) from None
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None
    except ValueError as err:  # not JSON, or not UTF-8
        raise InputError(f"{path}: invalid JSON ({err})") from None
    except RecursionError:  # nested deeper than the parser's stack
        raise InputError(f"{path}: invalid JSON (nested too deeply)") from None


def looks_like_bench(data: bytes) -> bool:
    """Whether *data* claims to be a bench record (then :func:`load_bench` judges the rest)."""
    if not data.lstrip().startswith(b"{"):
        return False
    try:
        claimed = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(claimed, dict) and claimed.get("format") == BENCH_FORMAT


def load_bench(path: Path | str) -> BenchRecord:
    """Read a ``bench.json`` (or the one in a snapshot directory *path*). InputError when it
    is missing, not JSON, not a bench record, or of another version."""
    file = Path(path)
    file = file / BENCH_FILE if file.is_dir() else file
    data = _read_json(file, f"{file}: no bench record there")
    if not isinstance(data, dict) or data.get("format") != BENCH_FORMAT:
        raise InputError(f"{file}: not a {BENCH_FORMAT} record")
    if data.get("version") != BENCH_VERSION:
        raise InputError(f"{file}: unsupported bench record version {data.get('version')}")
    try:
        findings = [decode_finding(f) for f in data["findings"]]
        medians = {
            str(lvl["level"]): float(lvl["median"])
            for lvl in data["levels"]
            if lvl.get("median") is not None
        }
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InputError(f"{file}: malformed bench record ({type(err).__name__}: {err})") from None
    return BenchRecord(file, str(data.get("created", "")), findings, medians, data)


def _read_manifest(path: Path) -> dict[str, Any]:
    data = _read_json(path / MANIFEST, f"{path} is not a snapshot: {MANIFEST} missing")
    if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
        raise InputError(f"{path / MANIFEST}: not a {SNAPSHOT_FORMAT} manifest")
    if data.get("version") != SNAPSHOT_VERSION:
        raise InputError(f"{path / MANIFEST}: unsupported snapshot version {data.get('version')}")
    if not isinstance(data.get("results"), list):
        raise InputError(f"{path / MANIFEST}: 'results' must be a list")
    return data


def _failure(entry: Mapping[str, Any]) -> tuple[str, FindingKind, str]:
    """(node, kind, what went wrong) for one failed manifest entry."""
    kind = FindingKind.COLLECT_TIMEOUT if entry.get("timed_out") else FindingKind.COLLECT_FAILED
    detail = str(entry.get("error") or f"exit code {entry.get('exit_code')}")
    tail = str(entry.get("stderr_tail") or "").strip().splitlines()
    return str(entry.get("node")), kind, detail + (f": {tail[-1].strip()}" if tail else "")


def _failure_findings(entries: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """One finding per node and distinct failure, naming every command it hit, so a dead
    node is one line in the report rather than one per command."""
    grouped: dict[tuple[str, FindingKind, str], list[str]] = {}
    for entry in entries:
        grouped.setdefault(_failure(entry), []).append(str(entry.get("command")))
    return [
        Finding(kind, node, f"{', '.join(commands)}: {detail}")
        for (node, kind, detail), commands in grouped.items()
    ]


def _entries(data: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for entry in data["results"]:
        if isinstance(entry, dict) and isinstance(entry.get("node"), str):
            yield entry


def _read_output(root: Path, entry: Mapping[str, Any]) -> str | None:
    rel = entry.get("file")
    if not isinstance(rel, str):
        return None
    try:
        path = (root / rel).resolve()
    except (OSError, ValueError):  # a NUL byte, a symlink loop
        raise InputError(f"{root / MANIFEST}: invalid file name {rel!r}") from None
    if root.resolve() not in path.parents:
        raise InputError(f"{root / MANIFEST}: file {rel!r} points outside the snapshot")
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


#: ``topo -m`` texts already parsed in this snapshot: nodes of one hardware print the same
#: matrix, so each distinct text is parsed once (a GpuTopology is immutable, shared).
_Topologies = dict[str, "GpuTopology | ParseError"]


def _topology(text: str, seen: _Topologies) -> GpuTopology:
    if text not in seen:
        try:
            seen[text] = parse_gpu_topology(text)
        except ParseError as err:
            seen[text] = err
    found = seen[text]
    if isinstance(found, ParseError):
        raise found
    return found


def _parse_node(
    node: NodeSnapshot, raw: Mapping[str, str], findings: list[Finding], seen: _Topologies
) -> None:
    """Fill gpus/topology/products from the node's outputs *raw*; -q first (it carries
    Health, and the product names come from the same pass), then the CSV. An empty output
    is a vendor's tool the node does not have (``collect --gpu-vendor auto`` runs each only
    where it exists): an AMD node has no NVIDIA fabric output to miss."""
    raw = {key: text for key, text in raw.items() if text.strip()}
    for key in (KEY_Q, KEY_QUERY):
        text = raw.get(key)
        if text is None:
            continue
        try:
            gpus = parse_fabric_output(text, node.products if key == KEY_Q else None)
        except ParseError as err:
            findings.append(Finding(FindingKind.COLLECT_PARSE_ERROR, node.name, f"{key}: {err}"))
            continue
        if gpus:
            node.gpus, node.fabric_source = gpus, key
            break
    amd = KEY_ROCM_TOPO in raw and KEY_TOPO not in raw
    if node.gpus is None and not amd and not any(f.subject == node.name for f in findings):
        findings.append(
            Finding(FindingKind.COLLECT_MISSING, node.name, "no nvidia-smi fabric output")
        )
    if KEY_ROCM_PRODUCT in raw and not node.products:
        node.products = parse_showproduct(raw[KEY_ROCM_PRODUCT])
    topo_key = topology_key(raw)
    if topo_key is not None:
        try:
            node.topology = _topology(raw[topo_key], seen)
        except ParseError as err:
            what = f"{topo_key}: {err}"
            findings.append(Finding(FindingKind.COLLECT_PARSE_ERROR, node.name, what))


def topology_key(outputs: Mapping[str, str]) -> str | None:
    """The key of the node's GPU topology output (NVIDIA's, else AMD's); None without one."""
    return next((key for key in TOPOLOGY_KEYS if outputs.get(key, "").strip()), None)


def _read_node(
    root: Path,
    name: str,
    entries: Sequence[Mapping[str, Any]],
    findings: list[Finding],
    seen: _Topologies,
) -> NodeSnapshot:
    """One node read and parsed from its manifest *entries*; its texts are dropped after."""
    node, raw, failed = NodeSnapshot(name), {}, []
    for entry in entries:
        text = _read_output(root, entry) if entry.get("exit_code") == 0 else None
        if text is not None:
            raw[str(entry.get("command"))] = text
        elif entry.get("exit_code") == 0 and not entry.get("error"):
            what = f"{entry.get('command')}: output file missing"
            findings.append(Finding(FindingKind.COLLECT_MISSING, name, what))
        else:
            failed.append(entry)
    findings += _failure_findings(failed)
    _parse_node(node, raw, findings, seen)
    return node


class _Stamp(msgspec.Struct, array_like=True, gc=False):
    """A file a node was read from, as it was then: manifest path, size, mtime."""

    file: str
    size: int
    mtime_ns: int


class _NodeFacts(msgspec.Struct, gc=False):
    files: list[_Stamp]
    gpus: list[GpuFabric] | None
    fabric_source: str | None
    products: dict[int, str]
    topology: int | None  # index into _Facts.topologies


class _Facts(msgspec.Struct, gc=False):
    format: str
    version: int
    topologies: list[str]
    nodes: dict[str, _NodeFacts]


def _stamps(root: Path, entries: Sequence[Mapping[str, Any]]) -> list[_Stamp] | None:
    """The stamp of every file *entries* name; None when one is not a plain readable file
    of a successful command (such a node is parsed, and its finding made, the long way)."""
    stamps = []
    for entry in entries:
        rel = entry.get("file")
        if entry.get("exit_code") != 0 or not isinstance(rel, str):
            return None
        try:
            info = os.stat(root / rel)
        except (OSError, ValueError):
            return None
        stamps.append(_Stamp(rel, info.st_size, info.st_mtime_ns))
    return stamps


def _plausible(known: _NodeFacts) -> bool:
    """Whether *known* holds only what the text readers can hand on: one-line values, a
    ClusterUUID that is a UUID, a clique that is a number (the facts file is no more
    trusted than the texts: a block name or a report line must not come from it unchecked)."""
    if known.fabric_source not in (None, KEY_Q, KEY_QUERY):
        return False
    texts: list[str | None] = list(known.products.values())
    for gpu in known.gpus or ():
        if gpu.cluster_uuid is not None and not CLUSTER_UUID.match(gpu.cluster_uuid):
            return False
        if gpu.clique_id is not None and not 0 <= gpu.clique_id < 2**32:
            return False
        texts += [gpu.bus_id, gpu.serial, gpu.uuid, gpu.state, gpu.status, gpu.health]
        texts += [gpu.health_bandwidth, *gpu.health_flags]
    return not any(text and ("\n" in text or "\r" in text) for text in texts)


def _read_facts(root: Path) -> _Facts | None:
    """The facts file, or None when there is none of this version (then every node is
    parsed from its texts: the file only saves time)."""
    try:
        facts = msgspec.json.decode((root / FACTS_FILE).read_bytes(), type=_Facts)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    ours = facts.format == FACTS_FORMAT and facts.version == FACTS_VERSION
    return facts if ours else None


def _from_facts(
    root: Path,
    name: str,
    entries: Sequence[Mapping[str, Any]],
    facts: _Facts | None,
    seen: _Topologies,
) -> NodeSnapshot | None:
    """Node *name* from the facts file when its files are as they were recorded."""
    known = facts.nodes.get(name) if facts else None
    if facts is None or known is None or not _plausible(known):
        return None
    if _stamps(root, entries) != known.files:
        return None
    topology = None
    if known.topology is not None:
        if not 0 <= known.topology < len(facts.topologies):
            return None
        topology = _topology(facts.topologies[known.topology], seen)
    return NodeSnapshot(name, known.gpus, known.fabric_source, topology, known.products)


def _node_entries(data: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    entries: dict[str, list[Mapping[str, Any]]] = {}
    for entry in _entries(data):
        entries.setdefault(check_node_name(entry["node"]), []).append(entry)
    return entries


def snapshot_facts(path: Path | str) -> bytes:
    """The facts file of the snapshot at *path* (``collect`` writes it beside the snapshot
    it wrote): every node read without a finding, parsed, with its files' stamps."""
    root = Path(path)
    entries = _node_entries(_read_manifest(root))
    seen: _Topologies = {}
    texts: dict[str, int] = {}
    nodes: dict[str, _NodeFacts] = {}
    for name in sorted(entries, key=natural_key):
        findings: list[Finding] = []
        node = _read_node(root, name, entries[name], findings, seen)
        stamps = _stamps(root, entries[name])
        if findings or stamps is None:
            continue
        text = _topology_text(root, entries[name])
        index = texts.setdefault(text, len(texts)) if text is not None else None
        nodes[name] = _NodeFacts(stamps, node.gpus, node.fabric_source, node.products, index)
    return msgspec.json.encode(_Facts(FACTS_FORMAT, FACTS_VERSION, list(texts), nodes))


def _topology_text(root: Path, entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The text the node's topology was read from (as ``_parse_node`` picks it)."""
    texts = {}
    for entry in entries:
        if entry.get("command") in TOPOLOGY_KEYS and entry.get("exit_code") == 0:
            text = _read_output(root, entry)
            if text is not None:
                texts[str(entry["command"])] = text
    key = topology_key(texts)
    return texts[key] if key else None


def node_outputs(snapshot: Snapshot, key: str) -> dict[str, str]:
    """Each node's successful output of the command *key* (``lldp``), read when asked: the
    snapshot keeps no texts, and only a source that needs one command's (LLDP, for an
    Ethernet fabric without UFM or ibnetdiscover) reads it."""
    found = {}
    for name, entries in _node_entries(snapshot.manifest).items():
        for entry in entries:
            if entry.get("command") == key and entry.get("exit_code") == 0:
                text = _read_output(snapshot.path, entry)
                if text is not None:
                    found[name] = text
    return found


def load_snapshot(path: Path | str) -> Snapshot:
    """Read and parse a snapshot directory written by ``topograph_slurm.collect.collect``.

    Raises InputError only when the snapshot as a whole is unusable (no manifest, bad JSON);
    per-node failures and unparsable outputs become findings.
    """
    root = Path(path)
    data = _read_manifest(root)
    entries = _node_entries(data)
    facts = _read_facts(root)
    findings: list[Finding] = []
    seen: _Topologies = {}
    nodes = {
        name: _from_facts(root, name, entries[name], facts, seen)
        or _read_node(root, name, entries[name], findings, seen)
        for name in sorted(entries, key=natural_key)
    }
    fabric_text = None
    fabric = data.get("fabric")
    if isinstance(fabric, dict):
        fabric_text = _read_output(root, fabric) if fabric.get("exit_code") == 0 else None
        if fabric_text is None:
            findings += _failure_findings([fabric])
    findings.sort(key=lambda f: (natural_key(f.subject), f.kind))
    bench = load_bench(root / BENCH_FILE) if (root / BENCH_FILE).is_file() else None
    return Snapshot(
        root,
        str(data.get("created", "")),
        str(data.get("via", "")),
        nodes,
        data,
        fabric_text,
        findings,
        bench,
    )
