"""Balanced packing: *n* weighted items into *m* packs of exactly ``n / m`` items each, the
heaviest item first into the lightest pack that still has room (EPLB's ``balanced_packing``,
as its README describes it).

Arithmetic is float32, as EPLB's torch tensors are, so near-equal sums compare as they do
there. Ties in weight are taken in item order (a stable sort); torch's default sort keeps
that order for rows of up to 16 items only, so on longer rows with equal weights EPLB may
pick another, equally balanced, packing.

The lightest pack with room comes off a heap keyed by (load, pack): the lowest-numbered of
equally light packs, as a scan in pack order picks; a full pack leaves the heap.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class Packing:
    """Each item's pack and its place in that pack (0 for the first item packed there)."""

    pack: list[int]
    rank: list[int]


def balanced_packing(weights: NDArray[np.float32], packs: int) -> Packing:
    """Items into *packs* equal-count packs, balancing their summed weight. One item per pack
    keeps item ``i`` in pack ``i`` (EPLB does so rather than sorting)."""
    count = len(weights)
    per_pack = count // packs
    if per_pack == 1:
        return Packing(list(range(count)), [0] * count)
    pack_of, rank_of = [0] * count, [0] * count
    heap = [(0.0, pack, 0) for pack in range(packs)]  # sorted: already a heap
    weight = weights.tolist()  # float32 values, exact as Python floats
    for item in np.argsort(-weights, kind="stable").tolist():
        load, chosen, filled = heap[0]
        pack_of[item], rank_of[item] = chosen, filled
        if filled + 1 < per_pack:
            # The float32 sum: the double sum of two float32s, rounded once to float32.
            added = float(np.float32(load + weight[item]))
            heapq.heapreplace(heap, (added, chosen, filled + 1))
        else:
            heapq.heappop(heap)
    return Packing(pack_of, rank_of)


def balanced_packing_rows(
    weights: NDArray[np.float32], packs: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """:func:`balanced_packing` of every row of *weights* at once (each domain's copies onto
    its GPUs): the rows' greedy steps run side by side, the lightest pack with room found by
    an ``argmin`` that, as the heap, takes the lowest-numbered of equal loads. Each item's
    pack and its place in it, as arrays shaped like *weights*."""
    rows, count = weights.shape
    if rows == 1:  # one row: the heap's Python steps are cheaper than an array step each
        one = balanced_packing(weights[0], packs)
        return np.asarray([one.pack], dtype=np.intp), np.asarray([one.rank], dtype=np.intp)
    per_pack = count // packs
    if per_pack == 1:
        return np.tile(np.arange(count), (rows, 1)), np.zeros((rows, count), dtype=np.intp)
    order = np.argsort(-weights, axis=1, kind="stable")
    loads = np.zeros((rows, packs), dtype=np.float32)
    filled = np.zeros((rows, packs), dtype=np.intp)
    pack = np.empty((rows, count), dtype=np.intp)
    rank = np.empty((rows, count), dtype=np.intp)
    every, full = np.arange(rows), np.float32(np.inf)
    for step in range(count):
        item = order[:, step]
        chosen = np.argmin(np.where(filled < per_pack, loads, full), axis=1)
        pack[every, item] = chosen
        rank[every, item] = filled[every, chosen]
        loads[every, chosen] += weights[every, item]
        filled[every, chosen] += 1
    return pack, rank
