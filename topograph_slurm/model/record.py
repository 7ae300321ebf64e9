"""A job's topology record: where its nodes sat, how its groups crossed the fabric, what was
unhealthy on its paths and a fingerprint of it all, taken once per job start
(``record start``) and read by ``record task``, ``record show`` and ``record diff``.

The file format (name, version, encoding) is ``sources/record.py``'s; these are its types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import Finding

#: The record files' format name and version, shared with the node side's files.
RECORD_FORMAT = "topograph-slurm/record"
RECORD_VERSION = 1
#: What ``record_refuse`` (``--refuse``) can name: the one gate so far.
REFUSE_TP_CROSSING = "tp-crossing"
REFUSALS = (REFUSE_TP_CROSSING,)

#: Each record hook's deadline in seconds (the never-fail runner's alarm; the installed
#: script's outer ``timeout`` adds HOOK_GRACE): well under what Slurm waits for a hook
#: (docs/record.md, "Deadlines"), so a hung scontrol or file system costs the job a record,
#: never its start.
HOOK_DEADLINES = {"start": 30, "task": 10, "node-start": 20, "node-end": 20}
HOOK_GRACE = 5


@dataclass(frozen=True, slots=True)
class RecordNode:
    """One node in rank order and its unit per fabric level (``leaf``, ``domain``, spine
    levels...); ``leaf``, ``block`` and ``spine`` repeat the ones trackers group by, and
    ``domain`` is the block again when the blocks are NVLink domains (empty when they are IB
    unit blocks: the node's NVLink domain is then not known)."""

    node: str
    units: dict[str, str] = field(default_factory=dict)
    leaf: str = ""
    block: str = ""
    spine: str = ""
    domain: str = ""


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """The parallel layout the record judged: TP and PP size, GPUs per node, and where TP came
    from (``admin-comment``: the --tp-size filter's record; ``gpus-per-node``: none, so TP
    is taken as one node's GPUs)."""

    tp: int
    pp: int
    gpus_per_node: int
    source: str


@dataclass(frozen=True, slots=True)
class JobRecord:
    """The ``part: job`` file: everything ``record start`` knew when the job started.
    ``crossings`` is explain's per kind and level (groups crossing out of each level);
    ``refused`` the gate's reason when it refused the job, else empty; ``findings`` the
    problems on the job's nodes and paths plus what the record could not learn."""

    format: str = RECORD_FORMAT
    version: int = RECORD_VERSION
    part: str = "job"
    job_id: str = ""
    restart_count: int = 0
    created: str = ""
    nodes: list[RecordNode] = field(default_factory=list)
    levels: list[str] = field(default_factory=list)
    layout: RecordLayout | None = None
    crossings: dict[str, dict[str, int]] = field(default_factory=dict)
    tp_home: str = ""
    tp_inside: bool = True
    verdict: str = ""
    bench: dict[str, float] = field(default_factory=dict)
    fingerprint: str = ""
    topology_sha256: str = ""
    topology_file: str = ""
    refused: str = ""
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        """The problems on the job's nodes and paths (what TOPOGRAPH_DEGRADED counts): not
        what the record itself could not learn."""
        return [
            finding
            for finding in self.findings
            if finding.is_problem and finding.kind != FindingKind.RECORD_INCOMPLETE
        ]

    def home_crossings(self) -> dict[str, int]:
        """Per kind, the groups crossing out of the TP home level (TOPOGRAPH_CROSSINGS)."""
        return {kind: levels.get(self.tp_home, 0) for kind, levels in self.crossings.items()}

    def units(self, field_name: str) -> list[str]:
        """The distinct leaves, blocks or spines (``leaf``/``block``/``spine``) in rank order."""
        found = (getattr(node, field_name) for node in self.nodes)
        return list(dict.fromkeys(unit for unit in found if unit))


@dataclass(frozen=True, slots=True)
class RecordPart:
    """One file beside a job record (``job-<ID>.d/``): a node's counters at start or end, or
    one task's binding check. ``binding`` is the task's status (empty for a node part); the
    findings are the links that degraded during the job or the task's far binding. A part that
    could not be read is one with a record-incomplete finding saying why."""

    name: str
    part: str
    node: str
    binding: str = ""
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordChange:
    """One way two records differ: what (``leaves``, ``crossings``, ``degraded``...), each
    side's value as text, and whether it matters for speed (then diff exits 1)."""

    what: str
    a: str
    b: str
    matters: bool


@dataclass(frozen=True, slots=True)
class RecordDiff:
    """Two records compared: where each came from and their changes."""

    a: str
    b: str
    changes: list[RecordChange] = field(default_factory=list)

    @property
    def matters(self) -> bool:
        return any(change.matters for change in self.changes)
