"""How full the fabric's units are: what ``occupancy`` reads from Slurm (each node's GPUs and
state, each job's nodes or need) and what it finds (per unit busy/free/down GPUs, jobs spread
over more units than their size needs, stranded GPUs, the largest TP group placeable now).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.model.job import TpRecord


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """One Slurm node's GPUs: configured (``gres``), allocated (``gres_used``, or all of them
    when the node is ALLOCATED whole), whether it takes no job (down, drained, failing), the
    partitions it is in, and whether any job holds some of it (ALLOCATED or MIXED: a CPU-only
    job uses no GPU but still breaks a whole free unit)."""

    name: str
    gpus: int
    used: int
    down: bool = False
    partitions: tuple[str, ...] = ()
    allocated: bool = False

    @property
    def busy(self) -> int:
        return min(self.used, self.gpus)

    @property
    def free(self) -> int:
        """GPUs a new job could get now: none on a node that takes no job."""
        return 0 if self.down else self.gpus - self.busy

    @property
    def down_gpus(self) -> int:
        """GPUs no job holds on a node that takes no job."""
        return self.gpus - self.busy if self.down else 0


@dataclass(frozen=True, slots=True)
class QueueJob:
    """One job from ``scontrol show jobs --json``: its nodes (running), its partitions and
    what one piece of it needs inside one unit (pending): ``piece_nodes`` nodes with
    ``piece_gpus`` free GPUs each (None: whole idle nodes, the job asked for no GPUs)."""

    job_id: str
    state: str
    nodes: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    node_count: int = 1
    gpus_per_node: int | None = None
    segment: int | None = None
    record: TpRecord | None = None

    @property
    def running(self) -> bool:
        return self.state.split("+")[0] == "RUNNING"

    @property
    def pending(self) -> bool:
        return self.state.split("+")[0] == "PENDING"


@dataclass(frozen=True, slots=True)
class Need:
    """What one piece of a pending job needs inside one unit: *nodes* nodes holding *gpus*
    free GPUs each (None: whole idle nodes), in one of *partitions* (empty: any)."""

    nodes: int
    gpus: int | None
    partitions: tuple[str, ...] = ()


@dataclass(slots=True)
class UnitOccupancy:
    """One unit at the TP home level (NVLink domain or block, else leaf): its nodes and GPUs
    busy, free and down; the largest TP group placeable in it now; whether its free GPUs are
    stranded (jobs pend and none of their pieces fits here)."""

    name: str
    nodes: int
    gpus: int
    busy: int
    free: int
    down: int
    largest_tp: int
    stranded: bool = False


@dataclass(frozen=True, slots=True)
class SpreadJob:
    """A running job on more units than its size needs: the units it holds and the fewest
    units of the topology's sizes that could hold its nodes."""

    job_id: str
    nodes: int
    held: int
    fewest: int


@dataclass(slots=True)
class Occupancy:
    """The fabric's occupancy at one level, for all nodes or one partition's."""

    level: str
    units: list[UnitOccupancy] = field(default_factory=list)
    spread: list[SpreadJob] = field(default_factory=list)
    pending: int = 0
    unplaced: list[str] = field(default_factory=list)

    @property
    def stranded(self) -> int:
        return sum(unit.free for unit in self.units if unit.stranded)

    @property
    def largest_tp(self) -> int:
        return max((unit.largest_tp for unit in self.units), default=0)

    def total(self, what: str) -> int:
        """The sum of one column (``gpus``, ``busy``, ``free``, ``down``) over the units."""
        return sum(int(getattr(unit, what)) for unit in self.units)


@dataclass(slots=True)
class OccupancyReport:
    """The whole fabric's occupancy and each partition's."""

    fabric: Occupancy
    partitions: dict[str, Occupancy] = field(default_factory=dict)
