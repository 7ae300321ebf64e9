"""Plan communication benchmarks from the fabric: one run per node with all its GPUs, and per
fabric level pairs of nodes whose path turns exactly at that level.

Attribution is the point. Inside each unit of a level (one leaf for ``leaf``, one spine for
``spine-1``...) every node is paired with at least two partners in other child units where
the unit allows it, so a bad node shows up slow with every partner while a bad leaf uplink
shows up only on the pairs that leave its leaf. Pairs of one round share no node and no
uplink (the uplinks of every unit below the pair's span that holds one of its ends), so they
run at the same time without disturbing each other's numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from topograph_slurm.analysis.placement.span import unit_of
from topograph_slurm.errors import UsageError
from topograph_slurm.model.bench import BenchLevel, BenchPlan, BenchRun
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.placement import LEVEL_NODE, FabricMap


def plan(
    fmap: FabricMap,
    nodes: Sequence[str],
    gpus_per_node: int,
    levels: Sequence[str] | None = None,
    max_pairs: int | None = None,
) -> BenchPlan:
    """The plan for *nodes* (the allocation, or every node of the fabric) on *fmap*; only
    *levels* when given (a usage error names the fabric's levels when one is unknown), at most
    *max_pairs* pairs per level (the rest dropped evenly, with a note)."""
    chosen = _check_levels(fmap, levels)
    placed = sorted({n for n in nodes if n in fmap.places}, key=natural_key)
    excluded = {n: "not on the fabric" for n in nodes if n not in fmap.places}
    result = []
    for index, level in enumerate(fmap.levels):
        if level not in chosen:
            continue
        if level == LEVEL_NODE:
            result.append(BenchLevel(level, [BenchRun(level, (n,)) for n in placed]))
        else:
            result.append(_pair_level(fmap, placed, index, max_pairs))
    plan_ = BenchPlan([lvl for lvl in result if lvl.runs or lvl.notes], gpus_per_node, excluded)
    return _schedule(plan_)


def _check_levels(fmap: FabricMap, levels: Sequence[str] | None) -> set[str]:
    """The levels asked for; a usage error naming those this fabric cannot measure and the
    ones it can (a level no pair spans, such as ``island`` with one island, is not one)."""
    if not levels:
        return set(fmap.levels)
    if "" in levels:
        raise UsageError(f"--levels: an empty level name in {','.join(levels)!r}")
    present = [level for index, level in enumerate(fmap.levels) if _spanned(fmap, index)]
    unknown = [level for level in levels if level not in present]
    if unknown:
        raise UsageError(
            f"--levels: {', '.join(unknown)} not in this fabric; its levels are "
            f"{', '.join(present)}"
        )
    return set(levels)


def _spanned(fmap: FabricMap, index: int) -> bool:
    """Whether a run can span level *index*: the node level, or one with a unit holding two
    of the units below it."""
    if index == 0:
        return True
    level, child = fmap.levels[index], fmap.levels[index - 1]
    children: dict[str, set[str]] = {}
    for node in fmap.places:
        children.setdefault(unit_of(fmap, node, level), set()).add(unit_of(fmap, node, child))
    return any(len(below) > 1 for below in children.values())


def _pair_level(
    fmap: FabricMap, nodes: Sequence[str], index: int, max_pairs: int | None
) -> BenchLevel:
    """Pairs spanning ``fmap.levels[index]``: inside each of its units, across its children."""
    level, child = fmap.levels[index], fmap.levels[index - 1]
    units: dict[str, list[str]] = {}
    for node in nodes:
        units.setdefault(unit_of(fmap, node, level), []).append(node)
    bench = BenchLevel(level, across=child)
    pairs: list[tuple[str, str]] = []
    for unit, members in units.items():
        children: dict[str, list[str]] = {}
        for node in members:
            children.setdefault(unit_of(fmap, node, child), []).append(node)
        if len(children) < 2:
            continue
        pairs += cross_pairs(list(children.values()))
        if len(children) == 2 and child != LEVEL_NODE:
            bench.notes.append(
                f"{_shown(unit)} has 2 {child} units: a slow uplink of one looks like the "
                "other's at this level"
            )
    order = {node: natural_key(node) for node in nodes}
    pairs = sorted(set(pairs), key=lambda p: (order[p[0]], order[p[1]]))
    if max_pairs is not None and len(pairs) > max_pairs:
        bench.notes.append(
            f"{len(pairs) - max_pairs} of {len(pairs)} pairs dropped by --max-pairs "
            f"{max_pairs} (--max-pairs N or --all-pairs for more)"
        )
        pairs = _spread(pairs, max_pairs)
    bench.runs = [BenchRun(level, pair, 0, _uplinks(fmap, pair, index)) for pair in pairs]
    return bench


def _shown(unit: str) -> str:
    """A unit name for a note; a node without a unit at a level is its own unit there."""
    return f"node {unit[1:]}" if unit.startswith("\0") else unit


def cross_pairs(children: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Pairs of nodes from different children, every node in two of them where the sizes
    allow: a circulant over the nodes laid out child by child, largest child first, with an
    offset no child spans (so both ends of a pair are in different children)."""
    groups = sorted(children, key=len, reverse=True)
    order = [node for group in groups for node in group]
    n, m = len(order), len(groups[0])
    pairs: list[tuple[str, str]] = []
    if 2 * m < n:
        pairs = [(order[i], order[(i + m) % n]) for i in range(n)]
    elif 2 * m == n:
        pairs = [(order[i], order[m + (i + k) % m]) for i in range(m) for k in (0, 1)]
    else:
        rest = order[m:]
        pairs = [(order[i], rest[(i + k) % len(rest)]) for i in range(m) for k in (0, 1)]
    rank = {node: natural_key(node) for node in order}
    return [(a, b) if rank[a] <= rank[b] else (b, a) for a, b in pairs if a != b]


def _spread(pairs: Sequence[tuple[str, str]], keep: int) -> list[tuple[str, str]]:
    """*keep* pairs spread evenly over the sorted list (so every unit keeps some)."""
    return [pairs[i * len(pairs) // keep] for i in range(keep)]


def uplinks_between(fmap: FabricMap, nodes: Iterable[str], span_index: int) -> set[tuple[str, str]]:
    """The uplinks a run's traffic crosses: every unit below its span (above the node) that
    holds one of its *nodes*, as ``(level, unit)``."""
    return {
        (level, unit_of(fmap, node, level)) for node in nodes for level in fmap.levels[1:span_index]
    }


def _uplinks(fmap: FabricMap, pair: tuple[str, str], index: int) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(uplinks_between(fmap, pair, index)))


def _schedule(bench: BenchPlan) -> BenchPlan:
    """Rounds: level after level (so a round's numbers compare), and inside a level each run
    in the first round where none of its nodes and uplinks is busy (first fit; each resource's
    busy rounds are the bits of one int, so finding the round is a few big-int operations)."""
    start = 0
    for level in bench.levels:
        busy: dict[object, int] = {}
        scheduled = []
        for run in level.runs:
            resources = (*run.nodes, *run.uplinks)
            taken = 0
            for resource in resources:
                taken |= busy.get(resource, 0)
            slot = (~taken & (taken + 1)).bit_length() - 1
            for resource in resources:
                busy[resource] = busy.get(resource, 0) | (1 << slot)
            scheduled.append(BenchRun(run.level, run.nodes, start + slot, run.uplinks))
        order = {node: natural_key(node) for run in scheduled for node in run.nodes}
        scheduled.sort(key=lambda r: (r.round, [order[n] for n in r.nodes]))
        level.runs = scheduled
        start = max((run.round for run in scheduled), default=start - 1) + 1
    return bench
