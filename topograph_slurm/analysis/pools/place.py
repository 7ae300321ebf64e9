"""Split a job's nodes into prefill and decode instances that match the machine's structure.

Three rules, in this priority (pure functions, no I/O):

1. **TP inside its home**: each instance's TP group on whole nodes inside one node, else one
   NVLink domain or block, else one leaf: the finest level with a unit large enough, as
   ``order`` keeps TP (``span.home_level``).
2. **Decode on the best links**: decode is tail-latency bound (KV reads, batch scheduling), so
   it takes the nodes with no problem on their path (no degraded link, missing or misaligned
   rail, unhealthy NVLink, slow benchmark): node quality is the count of network problems on
   the node, then of its other problems, then of its units' (a leaf's degraded uplink).
3. **KV pairs close**: the instances are grouped in *cells*, one decode instance and the
   prefill instances paired with it (prefill j with decode j mod D); each cell goes into the
   finest unit with room for it that still has healthy nodes for its decode (best fit: the
   smallest such unit), so each pair's KV-cache transfer stays in one leaf or block where it
   can, else one spine. Decodes are placed first, for every cell, and their prefills after,
   from the free nodes nearest their decode.

What could not be met is said per instance; nothing is refused here (the caller checks that
the deployment fits the nodes at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from topograph_slurm.analysis.placement.explain import NETWORK_KINDS, PathFacts
from topograph_slurm.analysis.placement.span import home_level, nodes_per_group, unit_of
from topograph_slurm.analysis.pools.judge import instance, judge, kv_path, path_problems
from topograph_slurm.model.placement import FabricMap
from topograph_slurm.model.pools import DECODE, PREFILL, Deployment, PoolPlan

#: A node's link quality, lower is better: network problems on the node, its other problems
#: (NVLink), problems on its units (a leaf's uplinks).
Quality = tuple[int, int, int]


def quality(node: str, fmap: FabricMap, facts: PathFacts | None) -> Quality:
    if facts is None:
        return (0, 0, 0)
    own = facts.problems.get(node, [])
    network = sum(1 for finding in own if finding.kind in NETWORK_KINDS)
    units = len(path_problems([node], fmap, facts)) - len(own)
    return (network, len(own) - network, units)


@dataclass(slots=True)
class _Cell:
    """One decode instance and the prefill instances paired with it, placed together."""

    decode: int
    prefills: list[int]
    need: int
    level: str = ""
    anchor: str = ""
    decode_nodes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Board:
    """The job's nodes, their quality, and which are still free."""

    fmap: FabricMap
    order: list[str]
    quality: dict[str, Quality]
    free: set[str]

    def best(self, nodes: Iterable[str]) -> list[str]:
        rank = {node: i for i, node in enumerate(self.order)}
        return sorted(nodes, key=lambda node: (self.quality[node], rank[node]))

    def units(self, level: str, among: Iterable[str] | None = None) -> dict[str, list[str]]:
        """The free nodes (of *among*) per unit of *level*, in job order."""
        pool = self.free if among is None else self.free.intersection(among)
        grouped: dict[str, list[str]] = {}
        for node in self.order:
            if node in pool:
                grouped.setdefault(unit_of(self.fmap, node, level), []).append(node)
        return grouped

    def pick(self, nodes: Sequence[str], count: int, home: str) -> list[str] | None:
        """The best *count* nodes of *nodes* inside one unit of *home*; None when no unit
        of *home* has that many."""
        choices = [
            self.best(members)[:count]
            for members in self.units(home, nodes).values()
            if len(members) >= count
        ]
        if not choices:
            return None
        return min(choices, key=lambda chosen: sorted(self.quality[n] for n in chosen))

    def take(self, nodes: Sequence[str], count: int, home: str) -> list[str]:
        """:meth:`pick`, else the best *count* of *nodes* wherever they are; taken off the
        free nodes."""
        chosen = self.pick(nodes, count, home) or self.best(self.free.intersection(nodes))[:count]
        self.free.difference_update(chosen)
        return chosen

    def healthy(self, nodes: Sequence[str]) -> bool:
        return all(self.quality[node] == (0, 0, 0) for node in nodes)


def place(
    deployment: Deployment,
    order: Sequence[str],
    gpus_per_node: int,
    fmap: FabricMap,
    facts: PathFacts | None = None,
) -> PoolPlan:
    """The deployment laid on the job's nodes *order* (each instance on whole nodes)."""
    board = _Board(fmap, list(order), {n: quality(n, fmap, facts) for n in order}, set(order))
    per = {
        role: nodes_per_group(deployment.size(role).tp, gpus_per_node) for role in (PREFILL, DECODE)
    }
    homes = {role: home_level(fmap, per[role]) for role in (PREFILL, DECODE)}
    cells = _cells(deployment, per)
    for cell in sorted(cells, key=lambda c: -c.need):
        _place_decode(board, cell, per[DECODE], homes[DECODE], cells)
    prefill_nodes: dict[int, list[str]] = {}
    for cell in cells:
        for index in cell.prefills:
            prefill_nodes[index] = _place_prefill(board, cell, per[PREFILL], homes[PREFILL])
    return _plan(deployment, gpus_per_node, fmap, facts, cells, prefill_nodes, board, per)


def _cells(deployment: Deployment, per: dict[str, int]) -> list[_Cell]:
    decodes = deployment.decode.count
    cells = [_Cell(d, [], per[DECODE]) for d in range(decodes)]
    for index in range(deployment.prefill.count):
        cell = cells[index % decodes]
        cell.prefills.append(index)
        cell.need += per[PREFILL]
    return cells


def _place_decode(board: _Board, cell: _Cell, count: int, home: str, cells: list[_Cell]) -> None:
    """The cell's unit (see the module's rule 3) and its decode's nodes in it; the nodes its
    prefills will take stay reserved against later cells that would fit inside that unit. At
    the finest level with room, a unit healthy enough for the whole cell comes first, then one
    healthy enough for its decode, each the smallest."""
    levels = board.fmap.levels
    fallback: tuple[str, list[str]] | None = None
    for level in levels:
        ranked = []
        for members in board.units(level).values():
            reserved = _reserved(board.fmap, level, members[0], cells)
            if len(members) - reserved < cell.need:
                continue
            chosen = board.pick(members, count, home)
            healthy = sum(1 for node in members if board.healthy([node])) - reserved
            grade = 0 if healthy >= cell.need else 1 if chosen and board.healthy(chosen) else 2
            ranked.append((grade, len(members), members))
        if not ranked:
            continue
        grade, _, members = min(ranked, key=lambda entry: entry[:2])
        if grade < 2:
            _settle(board, cell, level, members, count, home)
            return
        fallback = fallback or (level, members)
    level, members = fallback or (levels[-1], sorted(board.free))
    _settle(board, cell, level, members, count, home)


def _settle(
    board: _Board, cell: _Cell, level: str, members: list[str], count: int, home: str
) -> None:
    cell.decode_nodes = board.take(members, count, home)
    cell.level, cell.anchor = level, cell.decode_nodes[0] if cell.decode_nodes else ""


def _reserved(fmap: FabricMap, level: str, node: str, cells: list[_Cell]) -> int:
    """Nodes placed cells' prefills will take inside *node*'s unit of *level*."""
    index = fmap.levels.index(level)
    unit = unit_of(fmap, node, level)
    return sum(
        cell.need - len(cell.decode_nodes)
        for cell in cells
        if cell.anchor
        and fmap.levels.index(cell.level) <= index
        and unit_of(fmap, cell.anchor, level) == unit
    )


def _place_prefill(board: _Board, cell: _Cell, count: int, home: str) -> list[str]:
    """A prefill instance on the free nodes nearest its decode: the finest unit around the
    decode's nodes with room for it."""
    for level in board.fmap.levels:
        if not cell.anchor:
            break
        members = board.units(level).get(unit_of(board.fmap, cell.anchor, level), [])
        if len(members) >= count and board.pick(members, count, home) is not None:
            return board.take(members, count, home)
    return board.take(sorted(board.free), count, home)


def _plan(
    deployment: Deployment,
    gpus_per_node: int,
    fmap: FabricMap,
    facts: PathFacts | None,
    cells: list[_Cell],
    prefill_nodes: dict[int, list[str]],
    board: _Board,
    per: dict[str, int],
) -> PoolPlan:
    pair_home = home_level(fmap, per[PREFILL] + per[DECODE])
    decodes = [
        instance(DECODE, f"decode-{c.decode}", deployment.decode.tp, c.decode_nodes, fmap, facts)
        for c in cells
    ]
    prefills = [
        instance(PREFILL, f"prefill-{i}", deployment.prefill.tp, prefill_nodes[i], fmap, facts)
        for i in sorted(prefill_nodes)
    ]
    paths = []
    for cell in cells:
        for index in cell.prefills:
            pair = (prefills[index], decodes[cell.decode])
            paths.append(kv_path(pair, fmap, facts, pair_home))
    judge(prefills + decodes, paths, fmap)
    unused = [node for node in board.order if node in board.free]
    return PoolPlan(deployment, gpus_per_node, list(fmap.levels), prefills + decodes, paths, unused)
