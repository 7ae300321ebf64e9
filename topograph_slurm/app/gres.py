"""``gres``' use case: the measured GPU layout of each node (a snapshot's ``nvidia-smi topo
-m`` and ``-q``, or one capture for a hostlist of identical nodes) as a gres.conf plan."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology, GresDevice, GresPlan
from topograph_slurm.model.result import Finding
from topograph_slurm.sources.snapshot import KEY_TOPO

if TYPE_CHECKING:
    from topograph_slurm.analysis.nvlink.gres import CoreLayout
    from topograph_slurm.sources.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class GresSource:
    """Where the layout comes from: a snapshot directory, or one ``topo -m`` capture (and
    optionally that node's ``nvidia-smi -q``; on AMD ``rocm-smi --showtopo`` and
    ``--showproduct``) that every node of *nodes* shares."""

    snapshot: str | None = None
    topo_matrix: str | None = None
    nodes: str | None = None
    nvidia_smi_q: str | None = None
    threads_per_core: int | None = None
    sockets: int | None = None
    numa_node_as_socket: bool = False

    @property
    def name(self) -> str:
        """What the file's header says it was made from."""
        if self.snapshot:
            return self.snapshot
        return "<stdin>" if self.topo_matrix == "-" else str(self.topo_matrix)


def plan(source: GresSource) -> GresPlan:
    """Read the layout and fold it into gres.conf groups; InputError on unreadable input."""
    from topograph_slurm.analysis.nvlink import gres

    if source.snapshot is not None:
        nodes, findings = _snapshot_devices(source)
    else:
        nodes, findings = _capture_devices(source)
    result = gres.plan(nodes)
    return GresPlan(result.groups, (*findings, *result.findings), result.notes)


def _capture_devices(
    source: GresSource,
) -> tuple[dict[str, tuple[GresDevice, ...]], list[Finding]]:
    """The capture's devices for every node of --nodes (each expanded name must pass the
    Slurm name rule: a newline in one would start a line of its own in gres.conf), and the
    capture's xGMI finding, once for the hostlist."""
    from topograph_slurm.analysis.nvlink.xgmi import hive_findings
    from topograph_slurm.model import names
    from topograph_slurm.sources.node_captures import read_product_names, read_topo_matrix

    hosts = names.expand(str(source.nodes), "--nodes", UsageError)
    if not hosts:
        raise UsageError("--nodes names no node: gres.conf would hold no GPU")
    names.check(hosts, "node", "--nodes", UsageError)
    topo_path = str(source.topo_matrix)
    topo = read_topo_matrix(topo_path)
    products = read_product_names(source.nvidia_smi_q) if source.nvidia_smi_q else {}
    devices = _devices(topo_path, topo, products, source)
    return dict.fromkeys(hosts, devices), hive_findings(str(source.nodes), topo)


def _snapshot_devices(
    source: GresSource,
) -> tuple[dict[str, tuple[GresDevice, ...]], list[Finding]]:
    """Every node with a topo -m; the snapshot's findings for the nodes not read."""
    from topograph_slurm.sources.snapshot import load_snapshot

    snapshot = load_snapshot(str(source.snapshot))
    nodes: dict[str, tuple[GresDevice, ...]] = {}
    seen: _Layouts = {}
    for name, node in snapshot.nodes.items():
        if node.topology is None:
            continue
        try:
            nodes[name] = _layout(node.topology, node.products, _cores(source), seen)
        except InputError as err:
            raise InputError(f"{source.snapshot}: {name}: {err}") from None
    if not nodes:
        raise InputError(f"{source.snapshot}: no node has a readable nvidia-smi topo -m")
    unread = _unread(snapshot.findings, [n for n in snapshot.nodes if n not in nodes])
    return nodes, [*_hives(snapshot), *unread]


def _hives(snapshot: Snapshot) -> list[Finding]:
    """The xGMI findings of the snapshot's AMD nodes."""
    from topograph_slurm.analysis.nvlink.xgmi import hive_findings

    found = snapshot.nodes.items()
    return [f for name, node in found if node.topology for f in hive_findings(name, node.topology)]


def layout_findings(snapshot: Snapshot) -> list[Finding]:
    """The nodes whose GPU layout differs from their type's, and AMD nodes whose GPUs are not
    one xGMI hive, for every use case that reads a snapshot's fabric (generate's report,
    health: degraded, draw), as ``gres`` names them. A
    node whose topo -m gives no layout (no GPUs, an affinity gres cannot read) is left out
    here: ``gres`` itself says why."""
    from topograph_slurm.analysis.nvlink import gres

    nodes: dict[str, tuple[GresDevice, ...]] = {}
    seen: _Layouts = {}
    for name, node in snapshot.nodes.items():
        if node.topology is not None:
            with contextlib.suppress(InputError):
                nodes[name] = _layout(node.topology, node.products, _cores(GresSource()), seen)
    return [*_hives(snapshot), *gres.plan(nodes).findings]


#: Layouts already worked out in one snapshot, by (topo -m, product names): a snapshot shares
#: one parsed topo -m between the nodes that printed the same, so nodes of one type cost one.
_Layouts = dict[tuple[int, tuple[tuple[int, str], ...]], "tuple[GresDevice, ...] | InputError"]


def _layout(
    topo: GpuTopology, products: dict[int, str], cores: CoreLayout, seen: _Layouts
) -> tuple[GresDevice, ...]:
    """``node_devices`` of *topo* and *products*, once per distinct pair (its InputError
    likewise, raised for every node that has it)."""
    from topograph_slurm.analysis.nvlink.gres import node_devices

    key = (id(topo), tuple(sorted(products.items())))
    if key not in seen:
        try:
            seen[key] = node_devices(topo, products, cores)
        except InputError as err:
            seen[key] = err
    found = seen[key]
    if isinstance(found, InputError):
        raise found
    return found


def _unread(findings: list[Finding], missing: list[str]) -> list[Finding]:
    """Why each node without a topo -m has no lines: the snapshot's own finding when it has
    one (the command failed, the output did not parse), else that the output is missing."""
    told = [f for f in findings if f.subject in missing]
    known = {f.subject for f in told}
    what = f"no {KEY_TOPO} output: the node gets no gres.conf lines"
    told += [Finding(FindingKind.COLLECT_MISSING, n, what) for n in missing if n not in known]
    return told


def _cores(source: GresSource) -> CoreLayout:
    """How the source says to read a node's cores (threads per core, sockets, NUMA nodes as
    sockets)."""
    from topograph_slurm.analysis.nvlink.gres import CoreLayout

    return CoreLayout(source.threads_per_core, source.sockets, source.numa_node_as_socket)


def _devices(
    where: str, topo: GpuTopology, products: dict[int, str], source: GresSource
) -> tuple[GresDevice, ...]:
    """One node's devices; an InputError names *where* the layout came from."""
    from topograph_slurm.analysis.nvlink.gres import node_devices

    try:
        return node_devices(topo, products, _cores(source))
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
