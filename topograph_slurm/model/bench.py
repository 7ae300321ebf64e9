"""Communication benchmarks per fabric level: the plan (which nodes run together, in which
round), what one nccl-tests run printed, and what a run of the plan recorded.

A *run* is one nccl-tests launch: one node with all its GPUs (level ``node``), or a pair of
nodes whose path turns at one fabric level (its *span*: ``domain``, ``leaf``, ``spine-N``,
``island``, ``fabric``, as :mod:`topograph_slurm.model.placement` names them). Runs of one
round share no node and no switch uplink, so they can run at the same time without
disturbing each other's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.model.result import Finding

#: The nccl-tests binaries ``bench`` knows by name (``--test``).
TESTS: tuple[str, ...] = ("all_reduce_perf", "all_gather_perf", "alltoall_perf")


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One planned launch: its level, its nodes (one, or a pair in natural order), its round,
    and the uplinks its traffic crosses as ``(level, unit)`` (what it may not share)."""

    level: str
    nodes: tuple[str, ...]
    round: int = 0
    uplinks: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        """A stable name for the run: its level and nodes."""
        return f"{self.level}:{','.join(self.nodes)}"


@dataclass(slots=True)
class BenchLevel:
    """One level of the plan: its runs, the level its pairs cross inside one unit of it
    (``leaf`` for ``spine-1``), and the notes that limit what its results can say (pairs
    dropped by ``--max-pairs``, units too small to tell one uplink from another)."""

    level: str
    runs: list[BenchRun] = field(default_factory=list)
    across: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class BenchPlan:
    """Every level's runs, the rounds they fill, and the nodes left out with a reason."""

    levels: list[BenchLevel]
    gpus_per_node: int
    excluded: dict[str, str] = field(default_factory=dict)

    @property
    def runs(self) -> list[BenchRun]:
        return [run for level in self.levels for run in level.runs]

    @property
    def rounds(self) -> int:
        return max((run.round for run in self.runs), default=-1) + 1

    @property
    def nodes(self) -> list[str]:
        """Nodes in any run, in plan order without repeats."""
        return list(dict.fromkeys(node for run in self.runs for node in run.nodes))


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One message size of an nccl-tests table; in-place values are None where the test
    prints ``N/A``. ``wrong`` is the ``#wrong`` count (current layout), ``error`` the max
    relative error (older layout)."""

    size: int
    count: int
    dtype: str
    redop: str
    time_us: float | None
    algbw: float | None
    busbw: float | None
    in_time_us: float | None = None
    in_algbw: float | None = None
    in_busbw: float | None = None
    wrong: int | None = None
    in_wrong: int | None = None
    error: float | None = None
    in_error: float | None = None


@dataclass(slots=True)
class NcclOutput:
    """What one nccl-tests run printed: the table, the trailer, the header facts, and every
    NCCL warning or error (and damaged row) as a note."""

    rows: list[SizeRow]
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    last_size: int | None = None
    test: str = ""
    version: str = ""
    nccl_library: str = ""
    hosts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def peak(self) -> SizeRow | None:
        """The largest message size: the one that measures the link, not the latency."""
        return max(self.rows, key=lambda row: row.size, default=None)

    @property
    def cut(self) -> bool:
        """Whether the table ends before the largest size its header promised (``minBytes …
        maxBytes … step``): the output was cut, the largest row no measurement of the link."""
        peak = self.peak
        return peak is not None and self.last_size is not None and peak.size < self.last_size

    @property
    def wrong(self) -> int:
        """Wrong elements over all sizes, out- and in-place."""
        return sum((row.wrong or 0) + (row.in_wrong or 0) for row in self.rows)


@dataclass(slots=True)
class RunResult:
    """A run as recorded: the command, when and how long, how it ended, and the busbw of its
    largest size (None when it failed, timed out or printed no table)."""

    run: BenchRun
    argv: list[str]
    started: str
    duration: float
    exit_code: int | None
    timed_out: bool = False
    error: str = ""
    busbw: float | None = None
    output: NcclOutput | None = None
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.busbw is not None and not self.error


@dataclass(slots=True)
class BenchSummary:
    """A recorded sweep as ``diff`` compares it: where it was read (``source``), when it ran,
    each level's median busbw in the record's level order, and its findings."""

    source: str
    created: str
    medians: dict[str, float]
    findings: list[Finding] = field(default_factory=list)
