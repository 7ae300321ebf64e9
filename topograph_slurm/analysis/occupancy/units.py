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
    """The fabric's occupancy and each partition's (a partition: its nodes, its jobs)."""
    names = sorted({p for node in nodes for p in node.partitions})
    return OccupancyReport(
        occupancy(fmap, nodes, jobs),
        {
            name: occupancy(
                fmap,
                [node for node in nodes if name in node.partitions],
                [job for job in jobs if name in job.partitions],
            )
            for name in names
        },
    )


def occupancy(fmap: FabricMap, nodes: Sequence[NodeGpus], jobs: Sequence[QueueJob]) -> Occupancy:
    """Every unit's GPUs, the over-spread running jobs and the stranded units, *nodes* being
    Slurm's (a node the topology does not place is listed as unplaced, in no unit)."""
    level = unit_level(fmap)
    members: dict[str, list[NodeGpus]] = {}
    result = Occupancy(level)
    result.unplaced = [] if level == LEVEL_FABRIC else unplaced(fmap, nodes)
    for node in nodes:
        if node.name in fmap.places or level == LEVEL_FABRIC:
            members.setdefault(unit_of(fmap, node.name, level), []).append(node)
    largest = max((len(unit) for unit in members.values()), default=0)
    needs = sorted(
        {need_of(job, largest) for job in jobs if job.pending},
        key=lambda n: (n.nodes, n.gpus or 0),
    )
    result.pending = sum(1 for job in jobs if job.pending)
    for name, unit in members.items():
        result.units.append(_unit(name, unit, needs))
    result.units.sort(key=lambda u: u.name)
    result.spread = spread_jobs(fmap, level, [job for job in jobs if job.running])
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
    whole = sum(node.gpus for node in nodes if _idle(node))
    free = sum(node.free for node in nodes)
    held = {partition for node in nodes for partition in node.partitions}
    needs = [need for need in needs if not need.partitions or held.intersection(need.partitions)]
    return UnitOccupancy(
        name,
        len(nodes),
        sum(node.gpus for node in nodes),
        sum(node.busy for node in nodes),
        free,
        sum(node.down_gpus for node in nodes),
        max(whole, max((node.free for node in nodes), default=0)),
        stranded=bool(needs) and free > 0 and not any(fits(need, nodes) for need in needs),
    )


def _idle(node: NodeGpus) -> bool:
    """A node a whole-node piece can take: up, GPUs, none of them allocated."""
    return node.gpus > 0 and node.free == node.gpus


def fits(need: Need, nodes: Iterable[NodeGpus]) -> bool:
    """Whether *nodes* (one unit's) hold the piece now: *need.nodes* of them, in one of its
    partitions, each with *need.gpus* free GPUs (whole idle nodes when None)."""
    found = 0
    for node in nodes:
        if need.partitions and not set(need.partitions) & set(node.partitions):
            continue
        if _idle(node) if need.gpus is None else node.free >= need.gpus:
            found += 1
            if found >= need.nodes:
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


def spread_jobs(fmap: FabricMap, level: str, running: Iterable[QueueJob]) -> list[SpreadJob]:
    """Running jobs holding more units than the fewest units of the topology's sizes (largest
    first) that could hold their placed nodes, most excess first."""
    sizes = sorted((n for (lvl, _), n in fmap.unit_sizes.items() if lvl == level), reverse=True)
    reach = list(itertools.accumulate(sizes))
    found: list[SpreadJob] = []
    for job in running:
        placed = [node for node in job.nodes if node in fmap.places]
        if not placed or not reach:
            continue
        held = len({unit_of(fmap, node, level) for node in placed})
        fewest = min(bisect.bisect_left(reach, len(placed)) + 1, len(reach))
        if held > fewest:
            found.append(SpreadJob(job.job_id, len(placed), held, fewest))
    found.sort(key=lambda s: (s.fewest - s.held, s.job_id))
    return found
