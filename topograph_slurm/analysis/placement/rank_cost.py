"""A rank-cost matrix for SGLang's topology-aware EPLB (``--eplb-topology``): the cost of
sending from one EP rank to another, in EP-rank order, by the finest fabric level the two
ranks' nodes share.

SGLang's loader (python/sglang/srt/eplb/topology.py, ``load_rank_cost_matrix``) wants a
square, finite, non-negative matrix with a zero diagonal, and says only the ordering of the
values matters; so a cost here is a level's rank, not a time: 1 on the same node, then one
more for each fabric level (NVLink domain, leaf, island) the pair first shares, and one past
the last level when they share none (they meet at the spine or beyond).
"""

from __future__ import annotations

from topograph_slurm.model.placement import LEVEL_NODE, FabricMap


def rank_costs(fmap: FabricMap, hosts: list[str]) -> list[list[int]]:
    """The matrix for the EP ranks whose nodes are *hosts* (all on the fabric), in rank order."""
    levels = [level for level in fmap.levels if level != LEVEL_NODE]
    units = {host: [fmap.places[host].unit(level) for level in levels] for host in hosts}

    def cost(a: str, b: str) -> int:
        if a == b:
            return 1
        shared = (
            i for i, (x, y) in enumerate(zip(units[a], units[b], strict=True)) if x and x == y
        )
        return 2 + next(shared, len(levels))

    by_pair = {(a, b): cost(a, b) for a in units for b in units}
    return [
        [0 if i == j else by_pair[a, b] for j, b in enumerate(hosts)] for i, a in enumerate(hosts)
    ]
