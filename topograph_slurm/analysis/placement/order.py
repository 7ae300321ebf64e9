"""A node order for a job's ranks that keeps each kind of group on its fastest links.

The launcher lays ranks on nodes in hostfile order, so the node order decides which nodes a
group's ranks share. Slots (positions in the hostfile) are grouped the way the layout groups
ranks: the slots of one TP group must share an NVLink domain (or block, or leaf); the slots of
one model replica (the groups of every kind but DP and expert DP, so with EP the dense
replicas an EP group joins) should share a leaf. Replicas are packed into the leaf
that fits them most tightly, their TP units into the domain that fits them most tightly, so
partly free leaves are used up before full ones are broken; DP, which varies across replicas,
is what crosses leaves. Nodes with health findings are taken last in their domain.

The result is never worse than the order the job already has: the caller's order and a
natural-sorted one are candidates too, and the cheapest by :func:`.placement.cost` wins.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from topograph_slurm.analysis.placement.span import (
    KindSpans,
    cost,
    kind_spans,
    rank_nodes,
    unit_of,
)
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.placement import (
    DP,
    EDP,
    LEVEL_DOMAIN,
    LEVEL_LEAF,
    TP,
    FabricMap,
    ParallelLayout,
)


@dataclass(slots=True)
class Ordered:
    """The chosen node order, how its groups span the fabric, and which candidate won."""

    nodes: list[str]
    spans: dict[str, KindSpans]
    chosen: str


class _Slots:
    """Union-find over hostfile slots."""

    def __init__(self, count: int) -> None:
        self.parent = list(range(count))

    def find(self, slot: int) -> int:
        while self.parent[slot] != slot:
            self.parent[slot] = self.parent[self.parent[slot]]
            slot = self.parent[slot]
        return slot

    def join(self, slots: Sequence[int]) -> None:
        root = self.find(slots[0])
        for slot in slots[1:]:
            other = self.find(slot)
            if other != root:
                self.parent[max(root, other)] = min(root, other)
                root = min(root, other)

    def components(self) -> list[list[int]]:
        by_root: dict[int, list[int]] = {}
        for slot in range(len(self.parent)):
            by_root.setdefault(self.find(slot), []).append(slot)
        return sorted(by_root.values())


def _slot_components(
    layout: ParallelLayout, slots: int, gpus_per_node: int, kinds: Collection[str]
) -> list[list[int]]:
    """Slots joined by sharing a group of any of *kinds*."""
    joined = _Slots(slots)
    for kind in layout.kinds():
        if kind in kinds:
            for group in layout.groups(kind):
                joined.join(sorted({rank // gpus_per_node for rank in group}))
    return joined.components()


@dataclass(slots=True)
class _Pool:
    """Free nodes by domain, and the domains of each leaf."""

    free: dict[str, list[str]]
    leaves: dict[str, list[str]]

    def leaf_free(self, leaf: str) -> int:
        return sum(len(self.free[domain]) for domain in self.leaves[leaf])

    def take(self, domains: Sequence[str], count: int) -> list[str]:
        """*count* nodes from the domain of *domains* that fits them most tightly, spilling
        into the fullest others when none fits."""
        fitting = [d for d in domains if len(self.free[d]) >= count]
        ranked = (
            [min(fitting, key=lambda d: (len(self.free[d]), natural_key(d)))]
            if fitting
            else sorted(domains, key=lambda d: (-len(self.free[d]), natural_key(d)))
        )
        taken: list[str] = []
        for domain in ranked:
            while self.free[domain] and len(taken) < count:
                taken.append(self.free[domain].pop(0))
        return taken


def _pool(nodes: Sequence[str], fmap: FabricMap, unhealthy: Collection[str]) -> _Pool:
    domain_level = LEVEL_DOMAIN if LEVEL_DOMAIN in fmap.levels else LEVEL_LEAF
    free: dict[str, list[str]] = {}
    leaves: dict[str, list[str]] = {}
    for node in sorted(nodes, key=lambda n: (n in unhealthy, natural_key(n))):
        domain = unit_of(fmap, node, domain_level) if domain_level in fmap.levels else ""
        leaf = unit_of(fmap, node, LEVEL_LEAF) if LEVEL_LEAF in fmap.levels else domain
        free.setdefault(domain, []).append(node)
        if domain not in leaves.setdefault(leaf, []):
            leaves[leaf].append(domain)
    return _Pool(free, leaves)


def packed_order(
    layout: ParallelLayout,
    nodes: Sequence[str],
    gpus_per_node: int,
    fmap: FabricMap,
    unhealthy: Collection[str] = (),
) -> list[str]:
    """Replicas into the tightest-fitting leaf, TP units into the tightest-fitting domain."""
    slots = len(nodes)
    tp_units = _slot_components(layout, slots, gpus_per_node, [TP])
    within = [kind for kind in layout.kinds() if kind not in (DP, EDP)]
    replica_of = _slot_components(layout, slots, gpus_per_node, within)
    unit_at = {unit[0]: unit for unit in tp_units}
    pool = _pool(nodes, fmap, unhealthy)
    placed: dict[int, str] = {}
    for replica in replica_of:
        units = [unit_at[slot] for slot in replica if slot in unit_at]
        fitting = [leaf for leaf in pool.leaves if pool.leaf_free(leaf) >= len(replica)]
        leaf_order = (
            [min(fitting, key=lambda leaf: (pool.leaf_free(leaf), natural_key(leaf)))]
            if fitting
            else sorted(pool.leaves, key=lambda leaf: (-pool.leaf_free(leaf), natural_key(leaf)))
        )
        for unit in units:
            domains = [d for leaf in leaf_order for d in pool.leaves[leaf] if pool.free[d]]
            domains = domains or [d for d in pool.free if pool.free[d]]
            placed.update(zip(unit, pool.take(domains, len(unit)), strict=True))
    return [placed[slot] for slot in range(slots)]


def best_order(
    layout: ParallelLayout,
    nodes: Sequence[str],
    gpus_per_node: int,
    fmap: FabricMap,
    unhealthy: Collection[str] = (),
) -> Ordered:
    """The cheapest of the packed order, the given order and the natural order."""
    candidates = {
        "packed": packed_order(layout, nodes, gpus_per_node, fmap, unhealthy),
        "given": list(nodes),
        "natural": sorted(nodes, key=natural_key),
    }
    scored = {
        name: kind_spans(layout, rank_nodes(order, gpus_per_node), fmap)
        for name, order in candidates.items()
    }
    chosen = min(candidates, key=lambda name: cost(scored[name], fmap.levels))
    return Ordered(candidates[chosen], scored[chosen], chosen)
