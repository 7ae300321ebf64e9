"""A job's parallel layout and where its nodes sit: the facts ``explain`` and ``order`` work on.

A large-model job splits its GPUs into parallel groups. Which GPUs form a group follows the
rules of Megatron-Core's rank generator, from the launcher's rank order string (default
``tp-cp-ep-dp-pp``: the first kind varies fastest over consecutive ranks) and the order of the
nodes the ranks are laid on. Megatron-Core lays two grids over the same ranks:

- the **dense** grid, tp × cp × dp × pp (``ep`` has size 1 there): the TP, CP, DP and PP
  groups of attention and dense layers; DP is what tp·cp·pp leave of the world;
- the **expert** grid, etp × ep × edp × pp (``cp`` has size 1 there, ``tp`` is the expert TP
  size, ``dp`` the expert-data-parallel size world / (etp·ep·pp)): the EP groups (the MoE
  all-to-all), the expert TP groups and the expert-data-parallel groups.

Both read the same order string; kinds it leaves out are appended with size 1 (a kind larger
than 1 must be named), and an order that does not end in ``pp`` needs pp = 1 or the same DP
size in both grids, as Megatron-Core asserts. Where a node sits is a chain of units from the
node itself up to its island: its NVLink domain or block, its leaf switch, each spine level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from topograph_slurm.errors import UsageError

#: Parallelism kinds, as Megatron-Core names them in its rank order strings.
TP, CP, EP, DP, PP = "tp", "cp", "ep", "dp", "pp"
KINDS: tuple[str, ...] = (TP, CP, EP, DP, PP)
#: The expert grid's own kinds: expert TP (``tp`` of the expert grid) and expert DP (its ``dp``).
ETP, EDP = "etp", "edp"
#: Megatron-Core's default order: the first kind varies fastest over consecutive ranks.
MEGATRON_ORDER = "tp-cp-ep-dp-pp"
#: ``--hostfile-lines``: how a hostfile's lines are read.
PER_TASK, PER_NODE, AUTO = "task", "node", "auto"
LINE_KINDS = (AUTO, PER_TASK, PER_NODE)
#: What each expert-grid kind is called in the order string.
_ORDER_TOKEN = {TP: TP, CP: CP, EP: EP, DP: DP, PP: PP, ETP: TP, EDP: DP}

#: Fabric levels a group can span, finest first; spine levels and islands follow the leaf, and
#: ``fabric`` (no one unit of any level holds the group: across blocks without a tree, across
#: islands) closes every list.
LEVEL_NODE, LEVEL_DOMAIN, LEVEL_LEAF, LEVEL_ISLAND = "node", "domain", "leaf", "island"
LEVEL_FABRIC = "fabric"


@dataclass(frozen=True, slots=True)
class RankGrid:
    """One rank grid: a size per order token, the first token varying fastest."""

    tokens: tuple[str, ...]
    sizes: tuple[int, ...]

    def stride(self, token: str) -> int:
        """How many ranks apart two neighbours along *token* are."""
        return prod(self.sizes[: self.tokens.index(token)])

    def groups(self, token: str) -> list[list[int]]:
        """The groups along *token*: ranks that agree on every other token, each group and the
        list of groups in rank order (as Megatron-Core's masked orthogonal groups)."""
        stride, size = self.stride(token), self.sizes[self.tokens.index(token)]
        world = prod(self.sizes)
        return [
            [base + step * stride for step in range(size)]
            for base in range(world)
            if (base // stride) % size == 0
        ]


def parse_order(order: str) -> tuple[str, ...]:
    """The order string's kinds, lower-cased, each once; the kinds it leaves out appended (a
    usage error for an unknown or repeated kind)."""
    tokens = tuple(order.lower().split("-"))
    unknown = [token for token in tokens if token not in KINDS]
    if unknown or len(set(tokens)) != len(tokens):
        raise UsageError(
            f"--order names kinds of {', '.join(KINDS)}, each at most once (e.g. "
            f"{MEGATRON_ORDER}), got {order!r}"
        )
    return tokens + tuple(kind for kind in KINDS if kind not in tokens)


@dataclass(frozen=True, slots=True)
class ParallelLayout:
    """The sizes of each kind and the rank order (as given, and completed); ``dp`` and ``edp``
    are what the other kinds leave of the world."""

    tp: int
    pp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 1
    order: tuple[str, ...] = tuple(MEGATRON_ORDER.split("-"))
    etp: int = 0
    edp: int = 0
    given_order: str = MEGATRON_ORDER

    @classmethod
    def for_world(
        cls,
        world: int,
        tp: int,
        pp: int = 1,
        cp: int = 1,
        ep: int = 1,
        order: str = MEGATRON_ORDER,
        etp: int | None = None,
    ) -> ParallelLayout:
        """The layout of *world* ranks as Megatron-Core forms it; a usage error where it
        refuses one (sizes that do not divide the world, a kind missing from the order,
        an order not ending in pp whose grids disagree on DP)."""
        kinds = parse_order(order)
        etp = tp if etp is None else etp
        for name, size in ((TP, tp), (PP, pp), (CP, cp), (EP, ep), (ETP, etp)):
            if size < 1:
                raise UsageError(f"--{name} must be a positive integer, got {size}")
        dp = _rest(world, "dense", {TP: tp, CP: cp, PP: pp})
        edp = _rest(world, "expert", {ETP: etp, EP: ep, PP: pp})
        layout = cls(tp, pp, cp, ep, dp, kinds, etp, edp, order.lower())
        named = set(order.lower().split("-"))
        for kind in (TP, CP, EP, DP, PP, ETP, EDP):
            if layout.size(kind) > 1 and _ORDER_TOKEN[kind] not in named:
                raise UsageError(
                    f"--order {order!r} names no {_ORDER_TOKEN[kind]}, whose size is "
                    f"{layout.size(kind)}: name every kind larger than 1"
                )
        layout.check_pipelines()
        return layout

    def check_pipelines(self) -> None:
        """Megatron-Core's two checks that dense and expert layers share their pipelines: an
        order not ending in pp needs the same DP size in both grids, and the PP groups of both
        grids must be the same ranks."""
        if self.pp == 1:
            return
        if not self.given_order.endswith(PP) and self.edp != self.dp:
            raise UsageError(
                f"--order {self.given_order!r} does not end in pp: Megatron-Core then needs the "
                f"same DP size in dense and expert layers (dp={self.dp}, expert dp={self.edp}; "
                f"tp x cp must equal expert tp x ep)"
            )
        if self._grid(PP).stride(PP) != self._grid(EDP).stride(PP):
            raise UsageError(
                f"--order {self.given_order!r} gives dense and expert layers different pipeline "
                f"groups, which Megatron-Core refuses: put pp last"
            )

    def size(self, kind: str) -> int:
        return int(getattr(self, kind))

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def has_experts(self) -> bool:
        """Whether the job has an expert grid of its own (EP > 1)."""
        return self.ep > 1

    def _grid(self, kind: str) -> RankGrid:
        expert = kind in (EP, ETP, EDP)
        sizes = (
            {TP: self.etp, CP: 1, EP: self.ep, DP: self.edp, PP: self.pp}
            if expert
            else {TP: self.tp, CP: self.cp, EP: 1, DP: self.dp, PP: self.pp}
        )
        return RankGrid(self.order, tuple(sizes[token] for token in self.order))

    def groups(self, kind: str) -> list[list[int]]:
        """Every group of *kind*, in rank order; the groups of one kind partition the ranks."""
        return self._grid(kind).groups(_ORDER_TOKEN[kind])

    def kinds(self) -> list[str]:
        """The kinds with groups of more than one rank, as ``explain`` reports them: the dense
        kinds in order, then (with EP > 1) EP, the expert DP and the expert TP when its groups
        are not the TP groups."""
        dense = [kind for kind in self.order if kind != EP and self.size(kind) > 1]
        if not self.has_experts:
            return dense
        expert = [EP] + [EDP] * (self.edp > 1)
        if self.etp > 1 and self.groups(ETP) != self.groups(TP):
            expert.append(ETP)
        return dense + expert


def _rest(world: int, grid: str, sizes: dict[str, int]) -> int:
    """What *sizes* leave of *world* (its DP), or a usage error when they do not divide it."""
    model = prod(sizes.values())
    if world % model:
        named = " x ".join(f"{kind}={size}" for kind, size in sizes.items())
        raise UsageError(
            f"{world} GPUs do not split into {named} ({model} GPUs per replica of the {grid} "
            f"layers): use a node count that makes {world} a multiple of {model}"
        )
    return world // model


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
