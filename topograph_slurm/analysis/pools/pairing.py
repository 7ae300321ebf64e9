"""Which decode instance each prefill instance sends its KV cache to: the one whose KV path is
at the finest fabric level, every decode instance taking ``floor(P/D)`` or ``ceil(P/D)``
prefill instances (never more than ``ceil(P/D)``, so no decode serves more than its share).

Bottom-up on the levels: in every unit of the finest level the unit's open prefill instances
take the unit's decode instances with room, as many as both sides allow; what is left goes one
level up, and so on to ``fabric``. On nested units (node < block or leaf < spine) one such pass
keeps the most pairs inside every unit at once, the fewest on each coarse level. Two passes
keep the balance: first every decode instance is filled to ``floor(P/D)``, then the ``P mod D``
left over get one decode instance each (each decode at most one of them). Each pass is finest
for itself; the two together are not proven finest among all balanced pairings. Deterministic:
instances in their given order, a unit's decodes with the most room first, then the first
listed.

Pure functions, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from topograph_slurm.analysis.placement.span import span, unit_of
from topograph_slurm.model.placement import FabricMap

#: Per instance, its unit at each level that holds all its nodes (absent where it spans more).
Units = list[dict[str, str]]


def pair(
    prefills: Sequence[Sequence[str]], decodes: Sequence[Sequence[str]], fmap: FabricMap
) -> list[int]:
    """The decode index of every prefill instance, given each instance's nodes."""
    prefill_units, decode_units = _units(prefills, fmap), _units(decodes, fmap)
    paired: dict[int, int] = {}
    share, extra = divmod(len(prefills), len(decodes))
    for room in (r for r in (share, min(extra, 1)) if r):
        open_ = [p for p in range(len(prefills)) if p not in paired]
        rooms = dict.fromkeys(range(len(decodes)), room)
        paired |= _match(open_, rooms, prefill_units, decode_units, fmap.levels)
    return [paired[p] for p in range(len(prefills))]


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
