"""Where a job's parallel groups sit on the fabric: the span of every TP, CP, DP, PP, EP,
expert-DP and expert-TP group, counted per fabric level.

A group's *span* is the finest level whose one unit holds all its members: ``node`` (NVLink or
PCIe inside one node), ``domain`` (one NVLink domain or block), ``leaf`` (one leaf switch),
``spine-N`` (one switch N levels above the leaves), ``island`` (no common switch at all). A group
crosses every level finer than its span; ``fabric`` closes every list of levels (no one unit
holds the group). A job's ranks are the node of every rank: laid on a node order in blocks of
``gpus_per_node`` (rank r on node r // gpus_per_node, :func:`rank_nodes`), as torchrun and
``srun`` with one task per GPU do, or read line by line from a task-per-line hostfile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from topograph_slurm.model.placement import (
    CP,
    DP,
    EDP,
    EP,
    ETP,
    LEVEL_DOMAIN,
    LEVEL_FABRIC,
    LEVEL_ISLAND,
    LEVEL_LEAF,
    LEVEL_NODE,
    PP,
    TP,
    FabricMap,
    NodePlace,
    ParallelLayout,
)
from topograph_slurm.model.result import BlockTopology, Tree

#: Which kinds matter most, for comparing two node orders: TP traffic first (dense, then
#: expert), then CP, the MoE all-to-all, pipelines, and the data-parallel reductions last.
PRIORITY: tuple[str, ...] = (TP, ETP, CP, EP, PP, DP, EDP)


@dataclass(slots=True)
class KindSpans:
    """The groups of one kind: how many there are, how many span each level, and the worst
    (the first group with the widest span) as node names."""

    kind: str
    size: int
    groups: int
    by_level: dict[str, int] = field(default_factory=dict)
    worst_level: str = LEVEL_NODE
    worst_nodes: list[str] = field(default_factory=list)

    def crossing(self, level: str, levels: Sequence[str]) -> int:
        """Groups that do not fit in one unit of *level*."""
        index = levels.index(level)
        return sum(n for lvl, n in self.by_level.items() if levels.index(lvl) > index)


def fabric_map(
    tree: Tree | None, blocks: BlockTopology | None = None, source: str = ""
) -> FabricMap:
    """Every node's units from a tree (leaf, spine levels, island) and blocks (domain)."""
    places: dict[str, list[tuple[str, str]]] = {}
    sizes: dict[tuple[str, str], int] = {}
    levels = [LEVEL_NODE]
    if blocks is not None and any(block.nodes for block in blocks.blocks):
        levels.append(LEVEL_DOMAIN)
        for block in blocks.blocks:
            _add_unit(places, sizes, LEVEL_DOMAIN, block.name, block.nodes)
    if tree is not None and tree.leaves:
        levels += _tree_units(tree, places, sizes)
    elif blocks is not None and LEVEL_DOMAIN in levels:
        levels += _aggregate_units(blocks, places, sizes)
    levels.append(LEVEL_FABRIC)
    sizes[(LEVEL_FABRIC, LEVEL_FABRIC)] = len(places)
    return FabricMap(
        {node: NodePlace(node, tuple(units)) for node, units in places.items()},
        levels,
        sizes,
        source,
    )


def _add_unit(
    places: dict[str, list[tuple[str, str]]],
    sizes: dict[tuple[str, str], int],
    level: str,
    name: str,
    nodes: Iterable[str],
) -> None:
    count = 0
    for node in nodes:
        places.setdefault(node, []).append((level, name))
        count += 1
    sizes[(level, name)] = sizes.get((level, name), 0) + count


def _tree_units(
    tree: Tree, places: dict[str, list[tuple[str, str]]], sizes: dict[tuple[str, str], int]
) -> list[str]:
    """Leaf, ``spine-N`` and island units of every node; the levels they make, finest first."""
    parent = {child: upper.name for upper in tree.uppers for child in upper.children}
    level_of = {upper.name: upper.level for upper in tree.uppers}
    spine_levels = sorted({upper.level for upper in tree.uppers})
    for leaf in tree.leaves:
        _add_unit(places, sizes, LEVEL_LEAF, leaf.name, leaf.nodes)
        name = leaf.name
        while name in parent:
            name = parent[name]
            _add_unit(places, sizes, f"spine-{level_of[name]}", name, leaf.nodes)
        _add_unit(places, sizes, LEVEL_ISLAND, name, leaf.nodes)
    return [LEVEL_LEAF, *(f"spine-{level}" for level in spine_levels), LEVEL_ISLAND]


def _aggregate_units(
    blocks: BlockTopology,
    places: dict[str, list[tuple[str, str]]],
    sizes: dict[tuple[str, str], int],
) -> list[str]:
    """The ``block-N`` units of every ``BlockSizes`` level above the base: Slurm aggregates
    blocks in file order, block i opening a level's aggregate when i is a multiple of that
    level's size over the base size; a trailing aggregate short of blocks is no unit."""
    levels: list[str] = []
    base = blocks.block_sizes[0] if blocks.block_sizes else 0
    for size in blocks.block_sizes[1:]:
        if base < 1 or size % base:
            continue
        ratio, level = size // base, f"block-{size}"
        for start in range(0, len(blocks.blocks) - ratio + 1, ratio):
            members = blocks.blocks[start : start + ratio]
            name = f"{members[0].name}..{members[-1].name}"
            _add_unit(places, sizes, level, name, (n for block in members for n in block.nodes))
        levels.append(level)
    return levels


def unit_of(fmap: FabricMap, node: str, level: str) -> str:
    """The name of *node*'s unit at *level*; a node the level does not place is a unit of its
    own there (it shares nothing with anyone)."""
    if level == LEVEL_NODE:
        return node
    if level == LEVEL_FABRIC:
        return LEVEL_FABRIC
    place = fmap.places.get(node)
    found = place.unit(level) if place else None
    return found if found is not None else f"\0{node}"


def span(fmap: FabricMap, nodes: Iterable[str]) -> str:
    """The finest level whose one unit holds all *nodes*; ``fabric`` when none does (nodes in
    different blocks of a block-only topology, on separate islands, or unknown to it)."""
    members = set(nodes)
    for level in fmap.levels:
        if len({unit_of(fmap, node, level) for node in members}) == 1:
            return level
    return LEVEL_FABRIC


def rank_nodes(order: Sequence[str], gpus_per_node: int) -> list[str]:
    """The node of every rank when ranks are laid on *order* in blocks of *gpus_per_node*."""
    return [node for node in order for _ in range(gpus_per_node)]


def group_nodes(group: Sequence[int], ranks: Sequence[str]) -> list[str]:
    """The nodes a group's ranks run on, in rank order without repeats."""
    return list(dict.fromkeys(ranks[rank] for rank in group))


def kind_spans(
    layout: ParallelLayout, ranks: Sequence[str], fmap: FabricMap
) -> dict[str, KindSpans]:
    """For every kind with groups of more than one rank: how its groups span the fabric, the
    node of rank r being ``ranks[r]``."""
    result: dict[str, KindSpans] = {}
    rank = {level: i for i, level in enumerate(fmap.levels)}
    for kind in layout.kinds():
        groups = layout.groups(kind)
        spans = KindSpans(kind, layout.size(kind), len(groups), {lvl: 0 for lvl in fmap.levels})
        worst = -1
        for group in groups:
            nodes = group_nodes(group, ranks)
            level = span(fmap, nodes)
            spans.by_level[level] += 1
            if rank[level] > worst:
                worst, spans.worst_level, spans.worst_nodes = rank[level], level, nodes
        result[kind] = spans
    return result


def home_level(fmap: FabricMap, nodes_needed: int) -> str:
    """The finest level with a unit large enough for a group on *nodes_needed* nodes: where
    such a group can sit at best (a TP group of 8 on 4-GPU nodes needs 2 nodes: a domain of
    at least 2, else a leaf...)."""
    if nodes_needed <= 1:
        return LEVEL_NODE
    for level in fmap.levels[1:]:
        if any(size >= nodes_needed for (lvl, _), size in fmap.unit_sizes.items() if lvl == level):
            return level
    return fmap.levels[-1]


def nodes_per_group(size: int, gpus_per_node: int) -> int:
    """Nodes a group of *size* consecutive ranks needs at least."""
    return max(1, -(-size // gpus_per_node))


def cost(spans: Mapping[str, KindSpans], levels: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """A comparable cost of a node order: per kind in :data:`PRIORITY`, how many groups cross
    each level, coarsest level first (crossing a spine is worse than crossing a leaf)."""
    return tuple(
        tuple(spans[kind].crossing(level, levels) for level in reversed(levels))
        if kind in spans
        else ()
        for kind in PRIORITY
    )
