"""Where each fault sits on a picture of the fabric: on a node, a logical leaf, one rail's leaf
switch, an upper switch, a block, or the cables between a switch and the one above it.

A picture is only worth looking at if every fault shows up on the thing it is about, and the
ones that sit on nothing drawn are still listed (``notes``): nothing is dropped silently. The
faults come from the same places the report reads: links below the fabric's norm rate (from
the cables themselves, so a degraded spine uplink lands on its tier edge), the analysis'
findings (missing rails, rail disagreement and misalignment, islands), a snapshot's NVLink
findings, and every excluded HCA on the leaf it hangs off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from topograph_slurm.analysis.fabric.analyse import EXPECTED_REASONS
from topograph_slurm.analysis.fabric.degraded_links import below_norm
from topograph_slurm.analysis.nvlink.affinity import AFFINITY_KINDS
from topograph_slurm.analysis.nvlink.clique import (
    HEALTHY_BANDWIDTH,
    HEALTHY_SUMMARY,
    STATE_COMPLETED,
    STATUS_SUCCESS,
    VERDICT_KINDS,
)
from topograph_slurm.model import names
from topograph_slurm.model.fabric import Link
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuFabric
from topograph_slurm.model.result import Analysis, BlockTopology, Finding, Tree

#: Fault classes, in the order a legend lists them (and the first of a node's wins its colour).
FAULT_DEGRADED = "degraded"
FAULT_MISSING_RAIL = "missing-rail"
FAULT_DISAGREE = "rail-disagreement"
FAULT_MISALIGNED = "rail-misaligned"
FAULT_NVLINK = "nvlink"
FAULT_AFFINITY = "affinity"
FAULT_EXCLUDED = "excluded"
FAULT_ISLANDS = "islands"
FAULT_OTHER = "other"
FAULT_CLASSES: tuple[str, ...] = (
    FAULT_DEGRADED,
    FAULT_MISSING_RAIL,
    FAULT_DISAGREE,
    FAULT_MISALIGNED,
    FAULT_NVLINK,
    FAULT_AFFINITY,
    FAULT_EXCLUDED,
    FAULT_ISLANDS,
    FAULT_OTHER,
)
#: What each class means, as the legend says it.
FAULT_MEANING: dict[str, str] = {
    FAULT_DEGRADED: "degraded link (below the fabric's rate)",
    FAULT_MISSING_RAIL: "missing rail (fewer HCAs than its leaf peers)",
    FAULT_DISAGREE: "rails disagree (cabled to another unit's leaf)",
    FAULT_MISALIGNED: "rails misaligned (an HCA on another rail's leaf of its unit)",
    FAULT_NVLINK: "unhealthy NVLink fabric",
    FAULT_AFFINITY: "GPU↔NIC affinity (nearest NIC across NUMA, or not one NIC per GPU)",
    FAULT_EXCLUDED: "excluded HCAs (not a Slurm node)",
    FAULT_ISLANDS: "top of an island (no cable joins the islands)",
    FAULT_OTHER: "other finding",
}
_KIND_CLASS: dict[str, str] = {
    FindingKind.MISSING_RAIL: FAULT_MISSING_RAIL,
    FindingKind.RAIL_DISAGREEMENT: FAULT_DISAGREE,
    FindingKind.RAIL_MISALIGNED: FAULT_MISALIGNED,
    FindingKind.ISLANDS: FAULT_ISLANDS,
    **dict.fromkeys(VERDICT_KINDS, FAULT_NVLINK),
    **dict.fromkeys(AFFINITY_KINDS, FAULT_AFFINITY),
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault on one element: its class and what it says."""

    cls: str
    message: str


@dataclass(slots=True)
class FaultMap:
    """Faults by element name (node, leaf, upper switch, block, or a rail switch's GUID), on
    tier edges by ``(lower, upper)`` name, and the faults that sit on nothing drawn."""

    on: dict[str, list[Fault]] = field(default_factory=dict)
    edges: dict[tuple[str, str], list[Fault]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, element: str, fault: Fault) -> None:
        self.on.setdefault(element, []).append(fault)

    def classes(self, element: str) -> list[str]:
        """The distinct fault classes on *element*, in legend order."""
        faults = self.on.get(element)
        if not faults:
            return []
        found = {fault.cls for fault in faults}
        return [cls for cls in FAULT_CLASSES if cls in found]


@dataclass(slots=True)
class _Owners:
    """Which drawn element each GUID belongs to."""

    node_of_hca: dict[str, str]
    group_of_switch: dict[str, str]
    parent: dict[str, str]


def _owners(analysis: Analysis | None, tree: Tree | None) -> _Owners:
    hcas = analysis.hosts.rails if analysis else {}
    node_of_hca = {hca: node for node, rails in hcas.items() for hca, _leaf in rails}
    group: dict[str, str] = {}
    parent: dict[str, str] = {}
    if tree is not None:
        group = {guid: leaf.name for leaf in tree.leaves for guid in leaf.switches}
        group |= {guid: upper.name for upper in tree.uppers for guid in upper.switches}
        parent = {child: upper.name for upper in tree.uppers for child in upper.children}
    return _Owners(node_of_hca, group, parent)


def fabric_faults(
    analysis: Analysis | None,
    tree: Tree | None,
    blocks: BlockTopology | None,
    findings: Sequence[Finding] = (),
) -> FaultMap:
    """Every fault of *analysis* (when a fabric was read) and *findings* (a snapshot's, the
    blocks'), placed on the element of *tree* and *blocks* it is about."""
    faults = FaultMap()
    owners = _owners(analysis, tree)
    drawn = set(owners.parent) | set(owners.group_of_switch.values())
    if tree is not None:
        drawn |= {node for leaf in tree.leaves for node in leaf.nodes}
    if blocks is not None:
        drawn |= {block.name for block in blocks.blocks}
        drawn |= {node for block in blocks.blocks for node in block.nodes}
    if analysis is not None:
        _degraded(faults, analysis, owners)
        _excluded(faults, analysis, owners)
        if analysis.missing_nodes:
            count = len(analysis.missing_nodes)
            hostlist = names.fold(analysis.missing_nodes)
            faults.notes.append(f"{count} Slurm nodes missing from the fabric: {hostlist}")
    all_findings = [*(analysis.findings if analysis else ()), *findings]
    _findings(faults, all_findings, drawn)
    return faults


def _degraded(faults: FaultMap, analysis: Analysis, owners: _Owners) -> None:
    """Each link below the norm: on its node (a rail) or on its tier edge and leaf switch."""
    norm, slow = below_norm(analysis.fabric)
    for link in slow:
        fault = Fault(
            FAULT_DEGRADED,
            f"{_ends(analysis, link)} runs at {link.width}{link.speed}, "
            f"the norm is {''.join(norm)}",
        )
        ends = (link.a_guid, link.b_guid)
        nodes = [owners.node_of_hca[end] for end in ends if end in owners.node_of_hca]
        groups = [owners.group_of_switch.get(end) for end in ends]
        for node in nodes:
            faults.add(node, fault)
        switches = [end for end in ends if end in owners.group_of_switch]
        for switch in switches:
            faults.add(switch, fault)
        edge = _edge(groups, owners.parent)
        if edge is not None:
            faults.edges.setdefault(edge, []).append(fault)
        elif not nodes and not switches:
            faults.notes.append(fault.message)


def _edge(groups: Sequence[str | None], parent: Mapping[str, str]) -> tuple[str, str] | None:
    """``(lower, upper)`` when the two ends' groups are a switch and the one above it."""
    a, b = groups
    if a is None or b is None:
        return None
    if parent.get(a) == b:
        return a, b
    return (b, a) if parent.get(b) == a else None


def _ends(analysis: Analysis, link: Link) -> str:
    """The cable as ``name/port <-> name/port`` (switch names, HCA descriptions)."""

    def label(guid: str, port: int) -> str:
        ca = analysis.fabric.cas.get(guid)
        name = analysis.switch_names.get(guid) or (ca.description if ca else guid)
        return f"{name}/{port}"

    return f"{label(link.a_guid, link.a_port)} <-> {label(link.b_guid, link.b_port)}"


def _excluded(faults: FaultMap, analysis: Analysis, owners: _Owners) -> None:
    """Each excluded HCA on the leaf (or switch) it hangs off; the fabric working as designed
    (SHARP aggregation nodes, storage HCAs, HCAs left out with --hcas) and HCAs on no drawn
    switch are counted per reason in the notes."""
    counted: Counter[str] = Counter()
    switch_of = {name: guid for guid, name in analysis.switch_names.items()}
    for exclusion in analysis.exclusions:
        switch = switch_of.get(exclusion.leaf, exclusion.leaf)  # a name, or a GUID unnamed
        group = owners.group_of_switch.get(switch)
        if group is None or exclusion.reason in EXPECTED_REASONS:
            counted[exclusion.reason] += 1
        else:
            what = (
                f"{exclusion.description or exclusion.guid} ({exclusion.guid}): {exclusion.reason}"
            )
            fault = Fault(FAULT_EXCLUDED, what)
            faults.add(group, fault)
            faults.add(switch, fault)
    for reason, count in sorted(counted.items()):
        faults.notes.append(f"{count} HCAs excluded (not drawn as faults): {reason}")


def _findings(faults: FaultMap, findings: Iterable[Finding], drawn: set[str]) -> None:
    """Problem findings on their subject (or the nodes they name); the rest as notes. Degraded
    links are already on their cables; information is not a fault."""
    information = 0
    for finding in findings:
        if finding.kind == FindingKind.DEGRADED_LINK:
            continue
        if not finding.is_problem:
            information += 1
            continue
        what = f"{finding.message} ({finding.kind} of {finding.subject})"
        fault = Fault(_KIND_CLASS.get(finding.kind, FAULT_OTHER), what)
        targets = [name for name in (*finding.subject.split(","), *finding.nodes) if name in drawn]
        for target in dict.fromkeys(targets):
            faults.add(target, fault)
        if not targets:
            faults.notes.append(_text(finding))
    if information:
        faults.notes.append(f"{information} findings are information, not faults (see --report)")


def _text(finding: Finding) -> str:
    return f"[{finding.kind}] {finding.subject}: {finding.message}"


def gpu_faults(gpus: Sequence[GpuFabric]) -> dict[int, list[Fault]]:
    """NVLink-fabric faults of one node's GPUs by index: a registration that did not complete
    or succeed, or a health that is not Healthy/Full. A GPU with no fabric (State N/A: PCIe
    and single-node parts) has none."""
    faults: dict[int, list[Fault]] = {}
    for gpu in gpus:
        checks = [
            ("state", gpu.state, {STATE_COMPLETED}),
            ("status", gpu.status, {STATUS_SUCCESS}),
            ("health", gpu.health, HEALTHY_SUMMARY),
            ("bandwidth", gpu.health_bandwidth, HEALTHY_BANDWIDTH),
        ]
        found = [
            Fault(FAULT_NVLINK, f"GPU {gpu.index} fabric {what} is {value}")
            for what, value, good in checks
            if value is not None and value not in good
        ]
        found += [
            Fault(FAULT_NVLINK, f"GPU {gpu.index} fabric {flag}") for flag in gpu.health_flags
        ]
        if found:
            faults[gpu.index] = found
    return faults
