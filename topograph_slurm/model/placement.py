"""A job's parallel layout and where its nodes sit: the facts ``explain`` and ``order`` work on.

A large-model job splits its GPUs into tensor (TP), context (CP), expert (EP), data (DP) and
pipeline (PP) parallel groups. Which GPUs form a group follows from the launcher's rank order
(Megatron-Core's ``tp-cp-ep-dp-pp``: TP varies fastest) and from the order of the nodes the
ranks are laid on. Where a node sits is a chain of units from the node itself up to its
island: its NVLink domain or block, its leaf switch, each spine level above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.errors import UsageError

#: Parallelism kinds, as Megatron-Core names them in its rank order strings.
TP, CP, EP, DP, PP = "tp", "cp", "ep", "dp", "pp"
KINDS: tuple[str, ...] = (TP, CP, EP, DP, PP)
#: Megatron-Core's default order: the first kind varies fastest over consecutive ranks.
MEGATRON_ORDER = "tp-cp-ep-dp-pp"

#: Fabric levels a group can span, finest first; spine levels and islands follow the leaf, and
#: ``fabric`` (no one unit of any level holds the group: across blocks without a tree, across
#: islands) closes every list.
LEVEL_NODE, LEVEL_DOMAIN, LEVEL_LEAF, LEVEL_ISLAND = "node", "domain", "leaf", "island"
LEVEL_FABRIC = "fabric"


@dataclass(frozen=True, slots=True)
class ParallelLayout:
    """The sizes of each kind and the rank order; ``dp`` is what the other kinds leave."""

    tp: int
    pp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 1
    order: tuple[str, ...] = tuple(MEGATRON_ORDER.split("-"))

    @classmethod
    def for_world(
        cls, world: int, tp: int, pp: int = 1, cp: int = 1, ep: int = 1, order: str = MEGATRON_ORDER
    ) -> ParallelLayout:
        """The layout of *world* ranks with DP = the rest; a usage error when the sizes do
        not divide the world or the order string is not a permutation of the five kinds."""
        kinds = tuple(order.split("-"))
        if sorted(kinds) != sorted(KINDS):
            raise UsageError(
                f"--order must name each of {', '.join(KINDS)} once (e.g. {MEGATRON_ORDER}), "
                f"got {order!r}"
            )
        for name, size in ((TP, tp), (PP, pp), (CP, cp), (EP, ep)):
            if size < 1:
                raise UsageError(f"--{name} must be a positive integer, got {size}")
        model = tp * pp * cp * ep
        if world % model:
            raise UsageError(
                f"{world} GPUs do not split into tp={tp} x pp={pp} x cp={cp} x ep={ep} "
                f"({model} GPUs per replica): use a node count that makes {world} a multiple "
                f"of {model}"
            )
        return cls(tp, pp, cp, ep, world // model, kinds)

    def size(self, kind: str) -> int:
        return int(getattr(self, kind))

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.cp * self.ep * self.dp

    def coordinates(self, rank: int) -> dict[str, int]:
        """Where *rank* sits along each kind: mixed radix, the order's first kind fastest."""
        coords = {}
        for kind in self.order:
            rank, coords[kind] = divmod(rank, self.size(kind))
        return coords

    def groups(self, kind: str) -> list[list[int]]:
        """Every group of *kind*: the ranks that agree on all other kinds, in rank order.
        The groups of one kind partition the ranks."""
        by_rest: dict[tuple[int, ...], list[int]] = {}
        others = [k for k in self.order if k != kind]
        for rank in range(self.world):
            coords = self.coordinates(rank)
            by_rest.setdefault(tuple(coords[k] for k in others), []).append(rank)
        return list(by_rest.values())


@dataclass(frozen=True, slots=True)
class NodePlace:
    """Where one node sits: its units from the NVLink domain (or block) up to the island, as
    ``(level, unit name)`` pairs, finest first. A level the topology lacks is left out."""

    node: str
    units: tuple[tuple[str, str], ...] = ()

    def unit(self, level: str) -> str | None:
        return next((name for lvl, name in self.units if lvl == level), None)


@dataclass(slots=True)
class FabricMap:
    """Every node's place, the levels the topology has (finest first, ``node`` included),
    and how many nodes each unit holds in the whole topology (not only in one job)."""

    places: dict[str, NodePlace]
    levels: list[str]
    unit_sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    source: str = ""
