"""Which decode instance each prefill instance sends its KV cache to: every decode instance
takes ``f = floor(P/D)`` prefill instances, ``P mod D`` of them one more (never more than
``ceil(P/D)``), and the pairs keep the most inside every unit of every level, the coarsest
level first (the fewest across an island, then a spine, then a leaf...).

For given rooms (how many each decode takes), bottom-up is best at every level at once on
nested units: in every unit of the finest level its open prefills take its decodes with room,
as many as both sides allow; what is left goes one level up. A unit of p prefill and d decode
instances then keeps ``min(p, rooms)`` inside, which no pairing beats. What remains is which
decodes take the ``P mod D`` extra prefills (:func:`_extras`): a unit can use
``min(d, max(0, p - f·d))`` of them inside (its demand); handed down from the fabric, each
unit first gives each child what the child's level demands, then what the level below it
demands, and so on: the coarsest level keeps its most, each finer one its most after it (the
levels' most are not always reached together: two extras a leaf wants may be one a spine
needs elsewhere). tests/unit/test_pools_optimal.py checks this against every hand-out of the
extras on small cases.
Deterministic: instances in their given order, children in the order first met.

Pure functions, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import pairwise

from topograph_slurm.analysis.placement.span import span, unit_of
from topograph_slurm.model.placement import FabricMap

#: Per instance, its unit at each level that holds all its nodes (absent where it spans more).
Units = list[dict[str, str]]


def pair(
    prefills: Sequence[Sequence[str]], decodes: Sequence[Sequence[str]], fmap: FabricMap
) -> list[int]:
    """The decode index of every prefill instance, given each instance's nodes."""
    prefill_units, decode_units = _units(prefills, fmap), _units(decodes, fmap)
    floor, extra = divmod(len(prefills), len(decodes))
    rooms = dict.fromkeys(range(len(decodes)), floor)
    for d in _extras(prefill_units, decode_units, fmap.levels, floor, extra):
        rooms[d] += 1
    paired = _match(list(range(len(prefills))), rooms, prefill_units, decode_units, fmap.levels)
    return [paired[p] for p in range(len(prefills))]


Unit = tuple[int, str]


def _extras(
    prefill_units: Units, decode_units: Units, levels: Sequence[str], floor: int, extra: int
) -> list[int]:
    """The *extra* decodes that take ``floor + 1`` prefills (see the module)."""
    if not extra:
        return []
    count: dict[Unit, list[int]] = {}  # unit -> [prefill instances, decode instances] inside
    children: dict[Unit, dict[Unit, None]] = {}
    home: dict[Unit, list[int]] = {}  # unit -> decodes whose finest unit it is
    for side, units in ((0, prefill_units), (1, decode_units)):
        for index, places in enumerate(units):
            chain = [(levels.index(level), name) for level, name in places.items()]
            chain.sort()
            for unit, parent in pairwise(chain):
                children.setdefault(parent, {})[unit] = None
            for unit in chain:
                count.setdefault(unit, [0, 0])[side] += 1
            if side:
                home.setdefault(chain[0], []).append(index)
    need: dict[Unit, dict[int, int]] = {}

    def needs(unit: Unit) -> dict[int, int]:
        p, d = count[unit]
        found = {unit[0]: min(d, max(0, p - floor * d))}
        for child in children.get(unit, {}):
            for level, n in needs(child).items():
                found[level] = found.get(level, 0) + n
        need[unit] = found
        return found

    root = (len(levels) - 1, levels[-1])
    needs(root)
    chosen: list[int] = []
    stack = [(root, extra)]
    while stack:
        unit, budget = stack.pop()
        kids = list(children.get(unit, {}))
        given = dict.fromkeys(kids, 0)
        for level in range(unit[0] - 1, -1, -1):
            for kid in kids:
                add = min(budget, max(0, need[kid].get(level, 0) - given[kid]))
                given[kid] += add
                budget -= add
        for kid in kids:
            add = min(budget, count[kid][1] - given[kid])
            given[kid] += add
            budget -= add
        chosen.extend(home.get(unit, [])[:budget])
        stack.extend((kid, n) for kid, n in reversed(given.items()) if n)
    # levels that do not nest (a domain across leaves) can hand one decode two shares: the
    # first *extra* distinct ones, topped up in index order, keep the rooms summing to P
    distinct = list(dict.fromkeys(chosen))[:extra]
    rest = (d for d in range(len(decode_units)) if d not in set(distinct))
    return distinct + [next(rest) for _ in range(extra - len(distinct))]


def _units(instances: Sequence[Sequence[str]], fmap: FabricMap) -> Units:
    levels = fmap.levels
    units = []
    for nodes in instances:
        home = levels.index(span(fmap, nodes))
        units.append({lvl: unit_of(fmap, nodes[0], lvl) for lvl in levels[home:]})
    return units


def _match(
    prefills: list[int],
    rooms: dict[int, int],
    prefill_units: Units,
    decode_units: Units,
    levels: Sequence[str],
) -> dict[int, int]:
    """Open *prefills* onto decodes with *rooms* (consumed), finest level first."""
    paired: dict[int, int] = {}
    for level in levels:
        groups: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        for p in prefills:
            if p not in paired and level in prefill_units[p]:
                groups.setdefault(prefill_units[p][level], ([], []))[0].append(p)
        for d, room in rooms.items():
            if room and level in decode_units[d] and decode_units[d][level] in groups:
                groups[decode_units[d][level]][1].append((-room, d))
        for waiting, heap in groups.values():
            heapq.heapify(heap)
            for p in waiting:
                if not heap:
                    break
                room, d = heapq.heappop(heap)
                paired[p] = d
                rooms[d] = -room - 1
                if rooms[d]:
                    heapq.heappush(heap, (room + 1, d))
    return paired
