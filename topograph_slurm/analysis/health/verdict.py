"""Per-node health verdicts from findings: healthy, degraded (used last) or drain-worthy.

Each finding kind's severity, or why health ignores it, is in the catalogue
(``model/findings.py``, with the reasons). A kind it does not know (a record written by another
release) is *degraded* when it is a problem: used last, never drained for a reason this release
does not know; information of an unknown kind makes no verdict. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from topograph_slurm.model.findings import kind
from topograph_slurm.model.health import DEGRADED, HEALTHY, SEVERITIES, NodeLabels, Verdict
from topograph_slurm.model.result import Analysis, BlockTopology, Finding

_RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}


def severity(finding: Finding) -> str | None:
    """The finding's severity, or None when it says nothing about a node's health."""
    known = kind(finding.kind)
    if known is not None:
        return known.severity
    return DEGRADED if finding.is_problem else None


def _why_not(finding: Finding) -> str:
    known = kind(finding.kind)
    return known.ignored if known is not None else "information, not a problem"


def judge(
    findings: Iterable[Finding], nodes: Collection[str]
) -> tuple[dict[str, Verdict], list[tuple[Finding, str]]]:
    """A verdict for each of *nodes* (healthy unless a finding says otherwise, in the order
    given) and every finding that made none, with the reason.

    A finding counts for those of its ``nodes`` this run judges, else for its subject when
    that is one of *nodes*: a bench record naming a node the fabric does not show changes
    nothing (the finding is listed unused, saying so).
    """
    held: dict[str, list[tuple[str, Finding]]] = {node: [] for node in nodes}
    unused: list[tuple[Finding, str]] = []
    for finding in findings:
        level = severity(finding)
        named = finding.nodes or (finding.subject,)
        targets = [node for node in named if node in held]
        if level is None:
            unused.append((finding, _why_not(finding)))
            continue
        if not targets:
            unused.append((finding, f"{', '.join(named)}: not a node this run judges"))
        for node in targets:
            held[node].append((level, finding))
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
