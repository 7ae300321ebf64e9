"""A job's parallel groups as edges between nodes, for the job picture: each TP or PP group is
a path through its nodes in rank order, and an edge is *slow* when its two nodes share no unit
as fine as the group's home (the finest level with a unit large enough for the whole group,
as ``explain`` judges TP): that edge's traffic leaves the fast domain it could have stayed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from topograph_slurm.analysis.placement.span import group_nodes, home_level, span
from topograph_slurm.model.placement import PP, TP, FabricMap, ParallelLayout

#: The kinds a job picture draws: tensor parallelism (the traffic that must stay on NVLink)
#: and pipelines (point-to-point between stages).
DRAWN_KINDS: tuple[str, ...] = (TP, PP)


@dataclass(slots=True)
class GroupEdge:
    """Two consecutive nodes of a group: the finest level holding both, whether that is
    coarser than the group's home, the first group with this edge and how many groups share
    it (the 8 pipelines of two 8-GPU nodes ride one node pair)."""

    kind: str
    group: int
    a: str
    b: str
    level: str
    slow: bool
    groups: int = 1


@dataclass(slots=True)
class JobGroups:
    """Each job node's group index per drawn kind, and every group edge."""

    node_groups: dict[str, dict[str, int]]
    edges: list[GroupEdge]
    colour_kind: str | None


def job_groups(layout: ParallelLayout, ranks: Sequence[str], fmap: FabricMap) -> JobGroups:
    """Groups and edges of the kinds in :data:`DRAWN_KINDS`, rank r running on ``ranks[r]``.
    Nodes are coloured by the first of them whose groups span more than one node (TP across
    nodes, else pipelines)."""
    rank = {level: i for i, level in enumerate(fmap.levels)}
    node_groups: dict[str, dict[str, int]] = {node: {} for node in ranks}
    edges: dict[tuple[str, str, str], GroupEdge] = {}
    colour_kind = None
    for kind in DRAWN_KINDS:
        if layout.size(kind) < 2:
            continue
        for index, group in enumerate(layout.groups(kind)):
            nodes = group_nodes(group, ranks)
            for node in nodes:
                node_groups[node].setdefault(kind, index)
            if len(nodes) < 2:
                continue
            colour_kind = colour_kind or kind
            home = rank[home_level(fmap, len(nodes))]
            for a, b in pairwise(nodes):
                key = (kind, a, b)
                if key in edges:
                    edges[key].groups += 1
                    continue
                level = span(fmap, (a, b))
                edges[key] = GroupEdge(kind, index, a, b, level, rank[level] > home)
    return JobGroups(node_groups, list(edges.values()), colour_kind)
