"""Per unit occupancy, over-spread jobs and stranded GPUs: pure functions over the fabric's
places, Slurm's nodes and its jobs (the definitions are docs/occupancy.md's).

The unit is the TP home level: the finest level above the node (an NVLink domain or block,
else a leaf). A pending job's *piece* is what must sit inside one unit: its segment when it has
one (the record's, else Slurm's), else its TP group when the ``--tp-size`` record says so,
else the whole job; never more nodes than the largest unit holds (a job larger than every unit
takes whole units). A unit's free GPUs are *stranded* when jobs pend and no pending job's piece
fits in the unit's free GPUs now, counting only the pending jobs that may use the unit (a job
whose partitions hold none of the unit's nodes is no reason to call the unit stranded).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence

from topograph_slurm.analysis.placement.span import unit_of
from topograph_slurm.model.occupancy import (
    Need,
    NodeGpus,
    Occupancy,
    OccupancyReport,
    QueueJob,
    SpreadJob,
    UnitOccupancy,
)
from topograph_slurm.model.placement import LEVEL_FABRIC, FabricMap


def unplaced(fmap: FabricMap, nodes: Sequence[NodeGpus]) -> list[str]:
    """Slurm's nodes *fmap* places in no unit: its names are not Slurm's for them."""
    return [node.name for node in nodes if node.name not in fmap.places]


def unit_level(fmap: FabricMap) -> str:
    """The TP home level: the finest level above ``node`` (``fabric`` for a flat topology)."""
    return fmap.levels[1] if len(fmap.levels) > 1 else LEVEL_FABRIC


def report(fmap: FabricMap, nodes: Sequence[NodeGpus], jobs: Sequence[QueueJob]) -> OccupancyReport:
    """The fabric's occupancy and each partition's (a partition: its nodes, its jobs). Each
    node's unit and each running job's units are worked out once, not once per partition."""
    names = sorted({p for node in nodes for p in node.partitions})
    level = unit_level(fmap)
    units = _units(fmap, level, nodes)
    held = _held_units(fmap, level, [job for job in jobs if job.running])
    return OccupancyReport(
        occupancy(fmap, nodes, jobs, units, held),
        {
            name: occupancy(
                fmap,
                [node for node in nodes if name in node.partitions],
                [job for job in jobs if name in job.partitions],
                units,
                held,
            )
            for name in names
        },
    )


def _units(fmap: FabricMap, level: str, nodes: Iterable[NodeGpus]) -> dict[str, str]:
    """Each of *nodes* the topology places (every node on a flat one): its unit's name."""
    if level == LEVEL_FABRIC:
        return {node.name: LEVEL_FABRIC for node in nodes}
    placed = (node.name for node in nodes if node.name in fmap.places)
    return {name: unit_of(fmap, name, level) for name in placed}


def _held_units(
    fmap: FabricMap, level: str, running: Iterable[QueueJob]
) -> dict[tuple[str, ...], tuple[int, int]]:
    """How many of each running job's nodes the topology places and in how many units, by the
    job's nodes (jobs with none placed left out)."""
    held: dict[tuple[str, ...], tuple[int, int]] = {}
    for job in running:
        placed = [node for node in job.nodes if node in fmap.places]
        if placed:
            held[job.nodes] = (len(placed), len({unit_of(fmap, node, level) for node in placed}))
    return held


def occupancy(
    fmap: FabricMap,
    nodes: Sequence[NodeGpus],
    jobs: Sequence[QueueJob],
    units: dict[str, str] | None = None,
    held: dict[tuple[str, ...], tuple[int, int]] | None = None,
) -> Occupancy:
    """Every unit's GPUs, the over-spread running jobs and the stranded units, *nodes* being
    Slurm's (a node the topology does not place is listed as unplaced, in no unit). *units*
    and *held* (:func:`report`'s, for a superset of *nodes* and *jobs*) save working them
    out again."""
    level = unit_level(fmap)
    units = _units(fmap, level, nodes) if units is None else units
    members: dict[str, list[NodeGpus]] = {}
    result = Occupancy(level)
    result.unplaced = [] if level == LEVEL_FABRIC else unplaced(fmap, nodes)
    for node in nodes:
        home = units.get(node.name)
        if home is not None:
            members.setdefault(home, []).append(node)
    largest = max((len(unit) for unit in members.values()), default=0)
    pending = [job for job in jobs if job.pending]
    needs = sorted(
        {need_of(job, largest) for job in pending},
        key=lambda n: (n.nodes, n.gpus or 0),
    )
    result.pending = len(pending)
    for name, unit in members.items():
        result.units.append(_unit(name, unit, needs))
    result.units.sort(key=lambda u: u.name)
    running = [job for job in jobs if job.running]
    result.spread = spread_jobs(fmap, level, running, held)
    return result


def need_of(job: QueueJob, largest_unit: int) -> Need:
    """What one piece of a pending job needs inside one unit (the module's rule)."""
    record = job.record
    segment = (record.segment if record else None) or job.segment
    if segment:
        nodes = segment
    elif record:
        nodes = record.group
    else:
        nodes = job.node_count
    gpus = min(record.tp, record.gpus_per_node) if record else job.gpus_per_node
    return Need(max(1, min(nodes, largest_unit or nodes)), gpus, job.partitions)


def _unit(name: str, nodes: list[NodeGpus], needs: Sequence[Need]) -> UnitOccupancy:
    free = [node.free for node in nodes]
    idle = [node.gpus > 0 and room == node.gpus for node, room in zip(nodes, free, strict=True)]
    busy = [min(node.used, node.gpus) for node in nodes]
    whole = sum(node.gpus for node, empty in zip(nodes, idle, strict=True) if empty)
    held = {partition for node in nodes for partition in node.partitions}
    needs = [need for need in needs if not need.partitions or held.intersection(need.partitions)]
    total = sum(free)
    return UnitOccupancy(
        name,
        len(nodes),
        sum(node.gpus for node in nodes),
        sum(busy),
        total,
        sum(node.gpus - used for node, used in zip(nodes, busy, strict=True) if node.down),
        max(whole, max(free, default=0)),
        stranded=bool(needs) and total > 0 and not _any_fits(needs, nodes, free, idle),
    )


def _any_fits(
    needs: Sequence[Need], nodes: list[NodeGpus], free: list[int], idle: list[bool]
) -> bool:
    """Whether one of *needs* fits in the unit of *nodes* (:func:`fits` for each), counting
    the nodes that would hold a piece once per distinct (GPUs, partitions) the needs ask."""
    counted: dict[tuple[int | None, tuple[str, ...]], int] = {}
    for need in needs:
        key = (need.gpus, need.partitions)
        if key not in counted:
            wanted = set(need.partitions)
            counted[key] = sum(
                1
                for node, room, empty in zip(nodes, free, idle, strict=True)
                if (not wanted or not wanted.isdisjoint(node.partitions))
                and (empty if need.gpus is None else room >= need.gpus)
            )
        if counted[key] >= need.nodes:
            return True
    return False


#: A node's occupancy as ``draw --occupancy`` colours it.
NODE_STATES = ("busy", "mixed", "free", "stranded", "down")


def node_states(fmap: FabricMap, nodes: Iterable[NodeGpus], found: Occupancy) -> dict[str, str]:
    """Each node's state in :data:`NODE_STATES`: down (takes no job), busy (no GPU free),
    stranded (free GPUs in a stranded unit), free (every GPU free), else mixed."""
    stranded = {unit.name for unit in found.units if unit.stranded}
    states: dict[str, str] = {}
    for node in nodes:
        if node.down:
            states[node.name] = "down"
        elif node.free == 0:
            states[node.name] = "busy"
        elif unit_of(fmap, node.name, found.level) in stranded:
            states[node.name] = "stranded"
        else:
            states[node.name] = "free" if node.free == node.gpus else "mixed"
    return states


def spread_jobs(
    fmap: FabricMap,
    level: str,
    running: Iterable[QueueJob],
    held: dict[tuple[str, ...], tuple[int, int]] | None = None,
) -> list[SpreadJob]:
    """Running jobs holding more units than the fewest units of the topology's sizes (largest
    first) that could hold their placed nodes, most excess first. *held* is
    :func:`_held_units`' (for these jobs or more), else worked out here."""
    sizes = sorted((n for (lvl, _), n in fmap.unit_sizes.items() if lvl == level), reverse=True)
    reach = list(itertools.accumulate(sizes))
    if not reach:
        return []
    running = list(running)
    held = _held_units(fmap, level, running) if held is None else held
    found: list[SpreadJob] = []
    for job in running:
        if job.nodes not in held:
            continue
        placed, units = held[job.nodes]
        fewest = min(bisect.bisect_left(reach, placed) + 1, len(reach))
        if units > fewest:
            found.append(SpreadJob(job.job_id, placed, units, fewest))
    found.sort(key=lambda s: (s.fewest - s.held, s.job_id))
    return found
