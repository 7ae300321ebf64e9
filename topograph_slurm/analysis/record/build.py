"""A job record from the placement explanation: each node's units, explain's crossings per kind
and level, the problems on the job's paths, its levels' bench medians and the fingerprint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topograph_slurm.analysis.placement.explain import Explanation, PathFacts, path_problems
from topograph_slurm.analysis.record.fingerprint import fingerprint
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.placement import LEVEL_DOMAIN, LEVEL_FABRIC, LEVEL_LEAF, FabricMap
from topograph_slurm.model.record import JobRecord, RecordLayout, RecordNode
from topograph_slurm.model.result import Finding


@dataclass(frozen=True, slots=True)
class RecordStart:
    """What identifies one start of a job: its id, Slurm's restart count, when, and the
    topology file named (its path and sha256; empty when none was)."""

    job_id: str
    restart_count: int
    created: str
    topology_file: str = ""
    topology_sha256: str = ""


def record_nodes(
    order: Sequence[str], fmap: FabricMap, nvlink_domains: bool = False
) -> list[RecordNode]:
    """The nodes in rank order with their unit per level; the block is the NVLink domain or
    block (the domain too when *nvlink_domains*: the blocks are NVLink domains), the spine the
    first level above the leaf."""
    spine = next((lvl for lvl in fmap.levels if lvl.startswith("spine-")), "")
    nodes = []
    for node in order:
        place = fmap.places.get(node)
        units = dict(place.units) if place else {}
        nodes.append(
            RecordNode(
                node,
                units,
                units.get(LEVEL_LEAF, ""),
                units.get(LEVEL_DOMAIN, ""),
                units.get(spine, "") if spine else "",
                units.get(LEVEL_DOMAIN, "") if nvlink_domains else "",
            )
        )
    return nodes


def crossings(explanation: Explanation) -> dict[str, dict[str, int]]:
    """Per kind of group, how many groups cross out of each level (``fabric`` left out: no
    group leaves it)."""
    levels = explanation.levels
    return {
        kind: {
            level: report.spans.crossing(level, levels) for level in levels if level != LEVEL_FABRIC
        }
        for kind, report in explanation.kinds.items()
    }


def build_record(
    start: RecordStart,
    explanation: Explanation,
    fmap: FabricMap,
    facts: PathFacts | None,
    layout: RecordLayout,
    bench: Mapping[str, float],
    refused: str = "",
    notes: Sequence[Finding] = (),
) -> JobRecord:
    """The record of a job placed as *explanation* says; *notes* are what could not be
    learned (a bench record that would not read)."""
    nodes = explanation.nodes
    levels = explanation.levels
    return JobRecord(
        job_id=start.job_id,
        restart_count=start.restart_count,
        created=start.created,
        nodes=record_nodes(nodes, fmap, facts is not None and facts.nvlink_domains),
        levels=list(levels),
        layout=layout,
        crossings=crossings(explanation),
        tp_home=explanation.tp_home,
        tp_inside=explanation.tp_inside,
        verdict=explanation.verdict,
        bench={level: median for level, median in bench.items() if level in levels} or dict(bench),
        fingerprint=fingerprint(nodes, fmap, facts),
        topology_sha256=start.topology_sha256,
        topology_file=start.topology_file,
        refused=refused,
        findings=[*_unique(path_problems(nodes, fmap, facts)), *notes],
    )


def incomplete_record(start: RecordStart, what: str) -> JobRecord:
    """The record a hook writes when it could not place the job: only a finding saying why."""
    return JobRecord(
        job_id=start.job_id,
        restart_count=start.restart_count,
        created=start.created,
        topology_sha256=start.topology_sha256,
        topology_file=start.topology_file,
        findings=[incomplete(start.job_id, what)],
    )


def incomplete(job_id: str, what: str) -> Finding:
    """A ``record-incomplete`` finding about job *job_id*."""
    return Finding(FindingKind.RECORD_INCOMPLETE, f"job {job_id}", what)


def _unique(findings: Sequence[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))
