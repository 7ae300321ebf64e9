"""Per-node health verdicts from findings: healthy, degraded (used last) or drain-worthy.

Every finding kind has one severity here, with the reason in :data:`SEVERITY`'s comments:

- **drain**: a job placed on the node fails or cannot get what it asked for.
  ``missing-rail`` (an HCA's cable is down: NCCL's ranks there run on fewer HCAs than their
  peers or refuse the topology, and NHC's ``check_hw_ib`` drains such a node too); the NVLink
  registration failures ``fabric-not-completed``, ``fabric-status``, ``fabric-missing-id``,
  ``fabric-disagree`` and ``fabric-partial`` (the GPUs are not in the rack's NVLink domain, so
  a multi-node NVLink job fails at NCCL/IMEX initialisation); ``no-gpus`` and
  ``gpu-count-mismatch`` (GPUs fell off the bus: a job asking for the node's GPUs fails).
- **degraded**: jobs run, slower, so the node gets a higher Weight and is allocated last.
  ``degraded-link`` (a cable trained down to fewer lanes or a lower speed), ``rail-disagreement``
  (a moved cable: one rail's traffic crosses the spine), ``fabric-unhealthy`` (registered,
  but the driver reports reduced bandwidth or a route in recovery), and the benchmark outliers
  ``slow-node``, ``slow-link``, ``bench-drift`` (measured slower than peers or than before).
- **unknown**: ``collect-failed``, ``collect-timeout``, ``collect-missing``,
  ``collect-parse-error``: the node was not read, which is no evidence either way, so whatever
  it carries now stays until it is read again.
- **not a node's health** (listed with the reason, never a verdict): fabric layout facts
  (``islands``, ``split-subnets``, ``undersized-block``, ``block-base-below-unit``, the NVLink
  ``nvlink-rack-*`` bookkeeping), partition facts (``gpus-per-node-disagree``), a healthy
  configuration (``single-node-nvswitch``, ``fabric-state-not-collected``, ``fabric-na``: a node
  outside any multi-node NVLink domain is how HGX systems are built) and
  ``nvlink-included-with-findings`` (its cause is a finding of its own).

A problem kind not in the table is *degraded*: used last, never drained for a reason this
release does not know. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from topograph_slurm.analysis.bench.judge import KIND_BENCH_DRIFT, KIND_SLOW_LINK, KIND_SLOW_NODE
from topograph_slurm.analysis.fabric import block, leaf, subnet
from topograph_slurm.analysis.health import degraded as health
from topograph_slurm.analysis.nvlink import domains as nvlink
from topograph_slurm.analysis.nvlink import gpus
from topograph_slurm.analysis.nvlink.clique import FindingKind
from topograph_slurm.analysis.state import keep_missing
from topograph_slurm.model.health import (
    DEGRADED,
    DRAIN,
    HEALTHY,
    SEVERITIES,
    UNKNOWN,
    NodeLabels,
    Verdict,
)
from topograph_slurm.model.result import Analysis, BlockTopology, Finding

#: Collection finding kinds (``sources/snapshot.py`` owns them; topology may not import it,
#: tests/unit/test_verdict.py pins that the values agree).
COLLECT_KINDS = ("collect-failed", "collect-timeout", "collect-missing", "collect-parse-error")

_LAYOUT = "a fact about the fabric's layout, not one node's health"
_CONFIG = "a healthy configuration"

#: Severity of each kind (see the module docstring for the reasons).
SEVERITY: dict[str, str] = {
    health.KIND_MISSING_RAIL: DRAIN,
    FindingKind.NOT_COMPLETED: DRAIN,
    FindingKind.STATUS: DRAIN,
    FindingKind.MISSING_ID: DRAIN,
    FindingKind.DISAGREE: DRAIN,
    FindingKind.FABRIC_PARTIAL: DRAIN,
    FindingKind.NO_GPUS: DRAIN,
    FindingKind.GPU_COUNT: DRAIN,
    health.KIND_DEGRADED: DEGRADED,
    leaf.KIND_RAIL_DISAGREE: DEGRADED,
    FindingKind.UNHEALTHY: DEGRADED,
    KIND_SLOW_NODE: DEGRADED,
    KIND_SLOW_LINK: DEGRADED,
    KIND_BENCH_DRIFT: DEGRADED,
    **dict.fromkeys(COLLECT_KINDS, UNKNOWN),
}

#: Kinds that never make a verdict, and why (shown beside them).
NOT_HEALTH: dict[str, str] = {
    health.KIND_ISLANDS: _LAYOUT,
    subnet.KIND_SPLIT: _LAYOUT,
    block.KIND_UNDERSIZED: _LAYOUT,
    block.KIND_SHORT_BASE: _LAYOUT,
    nvlink.KIND_RACK_MISSING: _LAYOUT,
    nvlink.KIND_RACK_NEW: _LAYOUT,
    nvlink.KIND_RACK_SPLIT: _LAYOUT,
    gpus.KIND_GPUS_DISAGREE: "a fact about a partition, not one node",
    FindingKind.SINGLE_NODE: _CONFIG,
    FindingKind.NOT_COLLECTED: _CONFIG,
    FindingKind.FABRIC_NA: _CONFIG + " (no multi-node NVLink domain)",
    nvlink.KIND_INCLUDED: "its cause is a finding of its own",
    **dict.fromkeys(
        (keep_missing.KIND_KEPT, keep_missing.KIND_EXPIRED, keep_missing.KIND_NOT_KEPT),
        "the node is off the fabric: it is judged when it is back",
    ),
}
_RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}


def severity(finding: Finding) -> str | None:
    """The finding's severity, or None when it says nothing about a node's health."""
    if finding.kind in SEVERITY:
        return SEVERITY[finding.kind]
    if finding.kind in NOT_HEALTH or not finding.is_problem:
        return None
    return DEGRADED


def _why_not(finding: Finding) -> str:
    return NOT_HEALTH.get(finding.kind, "information, not a problem")


def judge(
    findings: Iterable[Finding], nodes: Collection[str]
) -> tuple[dict[str, Verdict], list[tuple[Finding, str]]]:
    """A verdict for each of *nodes* (healthy unless a finding says otherwise; in the order
    given, then nodes only findings name) and every finding that made none, with the reason.

    A finding counts for its ``nodes`` when it names them, else for its subject when that is
    one of *nodes*.
    """
    held: dict[str, list[tuple[str, Finding]]] = {node: [] for node in nodes}
    unused: list[tuple[Finding, str]] = []
    for finding in findings:
        level = severity(finding)
        targets = finding.nodes or ((finding.subject,) if finding.subject in held else ())
        if level is None:
            unused.append((finding, _why_not(finding)))
            continue
        if not targets:
            unused.append((finding, f"{finding.subject} is not a node this run judges"))
        for node in targets:
            held.setdefault(node, []).append((level, finding))
    return {node: _verdict(node, found) for node, found in held.items()}, unused


def _verdict(node: str, found: Sequence[tuple[str, Finding]]) -> Verdict:
    if not found:
        return Verdict(node, HEALTHY)
    worst = max((level for level, _ in found), key=_RANK.__getitem__)
    return Verdict(node, worst, tuple(finding for _, finding in found))


def node_labels(analysis: Analysis, blocks: BlockTopology | None) -> dict[str, NodeLabels]:
    """Each placed node's logical leaf and block, as :class:`NodeLabels`."""
    leaves = {node: group.name for group in analysis.tree.leaves for node in group.nodes}
    in_block: Mapping[str, str] = (
        {node: b.name for b in blocks.blocks for node in b.nodes} if blocks else {}
    )
    placed = leaves.keys() | in_block.keys()
    return {node: NodeLabels(leaves.get(node, ""), in_block.get(node, "")) for node in placed}
