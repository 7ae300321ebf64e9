"""Split a job's nodes into prefill and decode instances that match the machine's structure.

Three rules, in this priority (pure functions, no I/O):

1. **TP inside its home**: an instance of TP up to a node's GPUs on GPUs of one node, the
   ``g // tp`` instances of one role sharing a node (a *node group* of one node); a larger one
   on whole nodes (its node group) inside one NVLink domain or block, else one leaf: the finest
   level with a unit large enough, as ``order`` keeps TP (``span.home_level``). Prefill and
   decode never share a node: decode's step time would follow a prefill burst's compute and
   its KV sends on the same NICs and PCIe switches, and a node has one pool feature.
2. **Decode on the best links**: decode is tail-latency bound (KV reads, batch scheduling), so
   it takes the nodes with no problem on their path (no degraded link, missing or misaligned
   rail, unhealthy NVLink, slow benchmark): node quality is the count of network problems on
   the node, then of its other problems, then of its units' (a leaf's degraded uplink).
3. **KV pairs close**: the node groups are grouped in closed *cells*: the prefill instances in
   order, ⌈P/D⌉ to each of the first P mod D decode instances and ⌊P/D⌋ to the others, and
   node groups whose instances are paired so share a cell (a node of two prefill instances
   comes with both their decodes); a cell larger than any unit of the finest level is cut into
   one cell per decode node group, each prefill group to the one still wanting the most (with
   fewer prefill than decode instances, its last prefill groups to decode groups alone).
   Largest first, each cell goes into a unit of the finest level with room for it (room: its
   free nodes less those held, and no more than around it): one with healthy nodes for the
   whole cell, else one with healthy nodes for its decode (each the smallest: best fit); when
   no unit of a level has healthy nodes for the decode, the next level is tried, and only when
   none has does the decode take the finest unit's best nodes. A decode placed in a unit
   coarser than the finest goes to its sub-unit with the most room, so the most of its
   prefills join it. Decodes are placed first, for every cell, their prefills' nodes held back
   in the cell's unit (counted against later cells there and above); the prefills after, on
   the free nodes nearest their decode. The instances are then paired anew (:mod:`.pairing`:
   provably the fewest KV paths across each level for the nodes placed); the cells only put
   the node groups near each other, and are not proven the best split.

What could not be met is said per instance; nothing is refused here (the caller checks that
the deployment fits the nodes at all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from topograph_slurm.analysis.placement.explain import NETWORK_KINDS, PathFacts, path_problems
from topograph_slurm.analysis.placement.span import home_level, nodes_per_group, unit_of
from topograph_slurm.analysis.pools.deployment import per_node
from topograph_slurm.analysis.pools.judge import instance, judge, kv_path
from topograph_slurm.analysis.pools.pairing import pair
from topograph_slurm.model.placement import FabricMap
from topograph_slurm.model.pools import (
    DECODE,
    PREFILL,
    Deployment,
    Instance,
    KvPath,
    PoolPlan,
    PoolSize,
)

#: A node's link quality, lower is better: network problems on the node, its other problems
#: (NVLink), problems on its units (a leaf's uplinks).
Quality = tuple[int, int, int]


def quality(node: str, fmap: FabricMap, facts: PathFacts | None) -> Quality:
    """How good *node*'s links are (:data:`Quality`); all zero without path facts."""
    if facts is None:
        return (0, 0, 0)
    own = facts.problems.get(node, [])
    network = sum(1 for finding in own if finding.kind in NETWORK_KINDS)
    units = len(path_problems([node], fmap, facts)) - len(own)
    return (network, len(own) - network, units)


@dataclass(slots=True)
class _Cell:
    """Decode node groups and the prefill node groups whose instances send them KV cache,
    placed together: closed, so every pair of a cell placed in one unit stays in it."""

    decodes: list[int]
    prefills: list[int]
    need: int
    anchor: str = ""
    decode_nodes: list[list[str]] = field(default_factory=list)

    @property
    def decode_count(self) -> int:
        return sum(len(nodes) for nodes in self.decode_nodes)


Unit = tuple[str, str]


class _Board:
    """The job's nodes, their quality and units, which are free, and per unit (level, name)
    its members in job order, its free and free healthy nodes, and the nodes placed cells'
    prefills will take in it: counters, so choosing a cell's unit costs a pass over the units
    of a level, not over the nodes."""

    def __init__(self, fmap: FabricMap, order: Sequence[str], facts: PathFacts | None) -> None:
        self.fmap = fmap
        self.order = list(order)
        self.rank = {node: i for i, node in enumerate(self.order)}
        self.quality = {node: quality(node, fmap, facts) for node in self.order}
        self.free = set(self.order)
        self.unit = {node: {lvl: unit_of(fmap, node, lvl) for lvl in fmap.levels} for node in order}
        self.members: dict[Unit, list[str]] = {}
        for node in self.order:
            for level, name in self.unit[node].items():
                self.members.setdefault((level, name), []).append(node)
        self.free_count = {unit: len(nodes) for unit, nodes in self.members.items()}
        self.healthy_count = {
            unit: sum(1 for node in nodes if self.healthy([node]))
            for unit, nodes in self.members.items()
        }
        self.reserved: dict[Unit, int] = {}
        levels = fmap.levels
        self.around = {
            unit: [(lvl, self.unit[nodes[0]][lvl]) for lvl in levels[levels.index(unit[0]) :]]
            for unit, nodes in self.members.items()
        }
        self.by_level: dict[str, list[Unit]] = {}
        for unit in self.members:
            self.by_level.setdefault(unit[0], []).append(unit)
        self.largest = {
            level: max(len(self.members[unit]) for unit in units)
            for level, units in self.by_level.items()
        }

    def best(self, nodes: Iterable[str], avoid: frozenset[str] = frozenset()) -> list[str]:
        """*nodes* best first: by quality, then those not in *avoid*, then in job order."""
        return sorted(nodes, key=lambda n: (self.quality[n], n in avoid, self.rank[n]))

    def free_in(self, unit: Unit) -> list[str]:
        return [node for node in self.members[unit] if node in self.free]

    def pick(
        self, nodes: Sequence[str], count: int, home: str, avoid: frozenset[str] = frozenset()
    ) -> list[str] | None:
        """The best *count* of *nodes* (:meth:`best`) inside one unit of *home*; None when no
        unit of *home* has that many."""
        grouped: dict[str, list[str]] = {}
        for node in nodes:
            grouped.setdefault(self.unit[node][home], []).append(node)
        choices = [
            self.best(group, avoid)[:count] for group in grouped.values() if len(group) >= count
        ]
        if not choices:
            return None
        return min(
            choices,
            key=lambda chosen: (sorted(self.quality[n] for n in chosen), len(avoid & set(chosen))),
        )

    def take(
        self, nodes: Sequence[str], count: int, home: str, avoid: frozenset[str] = frozenset()
    ) -> list[str]:
        """:meth:`pick`, else the best *count* of *nodes* wherever they are; taken off the
        free nodes and their units' counters."""
        free = [node for node in nodes if node in self.free]
        chosen = self.pick(free, count, home, avoid) or self.best(free, avoid)[:count]
        for node in chosen:
            self.free.discard(node)
            for unit in self.unit[node].items():
                self.free_count[unit] -= 1
                self.healthy_count[unit] -= self.healthy([node])
        return chosen

    def healthy(self, nodes: Iterable[str]) -> bool:
        return all(self.quality[node] == (0, 0, 0) for node in nodes)

    def room(self, unit: Unit) -> int:
        """The nodes a cell may still take in *unit*: its free nodes less those held, and no
        more than any unit around it has (a node of a leaf whose free nodes are held is not
        free for a cell that fits the node)."""
        free, held = self.free_count, self.reserved
        return min(free[around] - held.get(around, 0) for around in self.around[unit])

    def spoken_for(self, unit: Unit, count: int) -> frozenset[str]:
        """The free nodes of *unit* in a finer unit whose free nodes, less *count*, would no
        longer hold what placed cells' prefills will take there: a decode placed at *unit*'s
        level takes them only when no other node is as good."""
        levels = self.fmap.levels
        finer = levels[: levels.index(unit[0])]
        return frozenset(
            node
            for node in self.free_in(unit)
            for sub in ((lvl, self.unit[node][lvl]) for lvl in finer)
            if self.reserved.get(sub, 0) and self.free_count[sub] - count < self.reserved[sub]
        )

    def reserve(self, cell: _Cell, level: str) -> None:
        """The cell's prefill nodes, held in its unit of *level* and every unit above it, and
        in each finer unit around its decode as many as that has room for (where its
        prefills will go first, so a later, smaller cell does not take them)."""
        levels = self.fmap.levels
        held = cell.need - cell.decode_count
        at = levels.index(level)
        for lvl in levels[min(1, at) :]:
            unit = (lvl, self.unit[cell.anchor][lvl])
            before = self.reserved.get(unit, 0)
            room = max(0, self.free_count[unit] - before)
            self.reserved[unit] = before + (held if levels.index(lvl) >= at else min(held, room))


def place(
    deployment: Deployment,
    order: Sequence[str],
    gpus_per_node: int,
    fmap: FabricMap,
    facts: PathFacts | None = None,
) -> PoolPlan:
    """The deployment laid on the job's nodes *order*: node groups first (rule 3), then the
    instances in them (:func:`_instances`), then the pairs (:func:`.pairing.pair`)."""
    board = _Board(fmap, order, facts)
    per = {
        role: nodes_per_group(deployment.size(role).tp, gpus_per_node) for role in (PREFILL, DECODE)
    }
    homes = {role: home_level(fmap, per[role]) for role in (PREFILL, DECODE)}
    finest = fmap.levels[1] if len(fmap.levels) > 2 else fmap.levels[-1]
    cells = _cells(deployment, gpus_per_node, per, board.largest[finest])
    for cell in sorted(cells, key=lambda c: -c.need):
        _place_decode(board, cell, per[DECODE], homes[DECODE])
    groups: dict[str, dict[int, list[str]]] = {PREFILL: {}, DECODE: {}}
    for cell in cells:
        groups[DECODE].update(zip(cell.decodes, cell.decode_nodes, strict=True))
        for index in cell.prefills:
            groups[PREFILL][index] = _place_prefill(board, cell, per[PREFILL], homes[PREFILL])
    placed = {role: [found[i] for i in sorted(found)] for role, found in groups.items()}
    instances = {
        role: _instances(role, deployment.size(role), placed[role], gpus_per_node, fmap, facts)
        for role in (PREFILL, DECODE)
    }
    prefills, decodes = instances[PREFILL], instances[DECODE]
    paths = _paths(prefills, decodes, fmap, facts, home_level(fmap, per[PREFILL] + per[DECODE]))
    judge(prefills + decodes, paths, fmap)
    unused = [node for node in board.order if node in board.free]
    return PoolPlan(deployment, gpus_per_node, list(fmap.levels), prefills + decodes, paths, unused)


def _paths(
    prefills: list[Instance],
    decodes: list[Instance],
    fmap: FabricMap,
    facts: PathFacts | None,
    home: str,
) -> list[KvPath]:
    """Each prefill's KV path to the decode :func:`.pairing.pair` gives it."""
    chosen = pair([p.nodes for p in prefills], [d.nodes for d in decodes], fmap)
    return [
        kv_path((prefill, decodes[d]), fmap, facts, home)
        for prefill, d in zip(prefills, chosen, strict=True)
    ]


def _cells(
    deployment: Deployment, gpus_per_node: int, per: dict[str, int], largest: int
) -> list[_Cell]:
    """The node groups joined into closed cells: the prefill instances in order, ⌈P/D⌉ to
    each of the first P mod D decode instances, ⌊P/D⌋ to each of the others (neighbours
    together, the fewest node groups per cell), and two node groups whose instances are
    paired so are in one cell. A node of two prefill instances thus comes with both their
    decodes (``prefill j → decode j mod D`` by node group put the second one's anywhere). A
    cell larger than *largest* (the most nodes a unit of the finest level above a node has)
    fits none, so it is cut: a cell per decode node group, each prefill node group (in order)
    to the one that still wants the most for its ⌊P/D⌋-⌈P/D⌉ share."""
    size = {role: deployment.size(role) for role in (PREFILL, DECODE)}
    k = {role: per_node(size[role].tp, gpus_per_node) for role in size}
    count = {role: -(-size[role].count // k[role]) for role in size}
    parent = list(range(count[PREFILL] + count[DECODE]))  # prefill groups, then decode groups

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def instances(role: str, group: int) -> int:
        return min(k[role], size[role].count - group * k[role])

    floor, extra = divmod(size[PREFILL].count, size[DECODE].count)
    first = 0
    for j in range(size[DECODE].count):
        take = floor + (j < extra)
        for i in range(first, first + take):
            a, b = root(i // k[PREFILL]), root(count[PREFILL] + j // k[DECODE])
            parent[max(a, b)] = min(a, b)
        first += take
    joined: dict[int, _Cell] = {}
    for group in range(count[PREFILL] + count[DECODE]):
        cell = joined.setdefault(root(group), _Cell([], [], 0))
        if group < count[PREFILL]:
            cell.prefills.append(group)
            cell.need += per[PREFILL]
        else:
            cell.decodes.append(group - count[PREFILL])
            cell.need += per[DECODE]
    cells = []
    for cell in joined.values():
        if cell.need <= largest or len(cell.decodes) == 1:
            cells.append(cell)
            continue
        cut = {d: _Cell([d], [], per[DECODE]) for d in cell.decodes}
        # what each decode group still wants, in prefill instances times D
        want = {d: instances(DECODE, d) * size[PREFILL].count for d in cell.decodes}
        for group in cell.prefills:
            most = max(cell.decodes, key=lambda d: (want[d], -d))
            want[most] -= instances(PREFILL, group) * size[DECODE].count
            cut[most].prefills.append(group)
            cut[most].need += per[PREFILL]
        cells.extend(cut.values())
    if floor == 0:  # fewer prefill instances than decode ones: each decode takes one or none
        _spread(cells, largest, per[PREFILL], instances)
    return cells


def _spread(
    cells: list[_Cell], largest: int, per_prefill: int, instances: Callable[[str, int], int]
) -> None:
    """With fewer prefill instances than decode ones, a cell too large for any unit gives its
    last prefill groups to cells of a decode group alone that have room for them (a decode
    instance takes one prefill instance or none): more cells fit a leaf."""
    for cell in (c for c in cells if c.need > largest and c.prefills):
        for group in list(reversed(cell.prefills)):
            if cell.need <= largest:
                break
            fits = (
                c
                for c in cells
                if not c.prefills
                and c.need + per_prefill <= largest
                and instances(DECODE, c.decodes[0]) >= instances(PREFILL, group)
            )
            target = next(fits, None)
            if target is not None:
                cell.prefills.remove(group)
                cell.need -= per_prefill
                target.prefills.append(group)
                target.need += per_prefill


def _place_decode(board: _Board, cell: _Cell, count: int, home: str) -> None:
    """The cell's unit (see the module's rule 3) and its decode's nodes in it; the nodes its
    prefills will take stay reserved against later cells in that unit and those above. At the
    finest level with room, a unit healthy enough for the whole cell comes first (the smallest),
    then one with healthy nodes for its decode (the smallest)."""
    fallback: Unit | None = None
    need, held = cell.need, board.reserved
    for level in board.fmap.levels:
        if board.largest[level] < need:  # no unit of the level could ever hold the cell
            continue
        own = [u for u in board.by_level[level] if board.free_count[u] - held.get(u, 0) >= need]
        # smallest first; the units around a unit (dearer than its own counters) asked first
        # only of the units healthy enough for the whole cell: this runs once per cell
        own.sort(key=board.free_count.__getitem__)
        healthy = (u for u in own if board.healthy_count[u] - held.get(u, 0) >= need)
        whole = next((u for u in healthy if board.room(u) >= need), None)
        if whole is not None:
            return _settle(board, cell, whole, count, home)
        room = [unit for unit in own if board.room(unit) >= need]
        if not room:
            continue
        for unit in room:
            chosen = board.pick(board.free_in(unit), count, home)
            if chosen is not None and board.healthy(chosen):
                return _settle(board, cell, unit, count, home)
        fallback = fallback or room[0]
    _settle(board, cell, fallback or board.by_level[board.fmap.levels[-1]][0], count, home)


def _settle(board: _Board, cell: _Cell, unit: Unit, count: int, home: str) -> None:
    avoid = board.spoken_for(unit, count * len(cell.decodes))
    cell.decode_nodes = [
        board.take(_roomiest(board, unit, count, home), count, home, avoid) for _ in cell.decodes
    ]
    if cell.decode_count:
        cell.anchor = next(nodes[0] for nodes in cell.decode_nodes if nodes)
        board.reserve(cell, unit[0])


def _roomiest(board: _Board, unit: Unit, count: int, home: str) -> list[str]:
    """*unit*'s free nodes, narrowed to the finer unit (of the decode's home level, or the
    finest above a node) with the most room left (free less held) where a decode of *count*
    nodes is as good as anywhere in *unit*: room in its coarsest sub-unit first, then in each
    finer one. A cell too large for any finer unit keeps the most of its prefills near its
    decode."""
    nodes = board.free_in(unit)
    first = board.pick(nodes, count, home)
    levels = board.fmap.levels
    finest = max(levels.index(home), 1)
    if first is None or finest >= levels.index(unit[0]):
        return nodes
    quality = sorted(board.quality[node] for node in first)
    between = levels[finest : levels.index(unit[0])]
    grouped: dict[str, list[str]] = {}
    for node in nodes:
        grouped.setdefault(board.unit[node][levels[finest]], []).append(node)

    def room(name: str) -> tuple[int, ...]:
        node = grouped[name][0]
        subs = [(lvl, board.unit[node][lvl]) for lvl in reversed(between)]
        return tuple(board.free_count[sub] - board.reserved.get(sub, 0) for sub in subs)

    for name in sorted(grouped, key=room, reverse=True):
        chosen = board.pick(grouped[name], count, home)
        if chosen is not None and sorted(board.quality[n] for n in chosen) == quality:
            return grouped[name]
    return nodes


def _place_prefill(board: _Board, cell: _Cell, count: int, home: str) -> list[str]:
    """A prefill node group on the free nodes nearest its decode: the finest unit around the
    decode's nodes with room for it."""
    if cell.anchor:
        for level, name in board.unit[cell.anchor].items():
            if board.free_count[(level, name)] < count:
                continue
            members = board.free_in((level, name))
            if board.pick(members, count, home) is not None:
                return board.take(members, count, home)
    return board.take(board.order, count, home)


def _instances(
    role: str,
    size: PoolSize,
    groups: list[list[str]],
    gpus_per_node: int,
    fmap: FabricMap,
    facts: PathFacts | None,
) -> list[Instance]:
    """A role's instances in its node groups: :func:`.deployment.per_node` of them to a group,
    instance *s* of a group on GPUs ``s*tp`` to ``(s+1)*tp - 1`` of each of its nodes (an
    instance larger than a node: its share of each node's GPUs from 0)."""
    k = per_node(size.tp, gpus_per_node)
    found = []
    for index in range(size.count):
        nodes = groups[index // k]
        width = min(size.tp, -(-size.tp // max(1, len(nodes))))
        first = (index % k) * width
        gpus = list(range(first, first + width))
        found.append(instance(role, f"{role}-{index}", size.tp, nodes, gpus, fmap, facts))
    return found
