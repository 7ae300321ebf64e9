"""What ``doctor`` checks and finds: the facts it read (slurmctld's settings, files, the run's
own state) and one verdict per check (ok / warn / fail, with the line that fixes it).

The JSON ``doctor --json`` prints is versioned here (:data:`DOCTOR_FORMAT`,
:data:`DOCTOR_VERSION`); docs/doctor.md describes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topograph_slurm.model.slurm_config import SlurmConfig

DOCTOR_FORMAT = "topograph-slurm-doctor"
DOCTOR_VERSION = 1
OK, WARN, FAIL = "ok", "warn", "fail"
#: The hooks a job record uses and the ``record`` subcommand each runs (docs/record.md).
HOOKS = {
    "PrologSlurmctld": "start",
    "Prolog": "node-start",
    "TaskProlog": "task",
    "Epilog": "node-end",
}


@dataclass(frozen=True, slots=True)
class FileFacts:
    """One path as doctor found it: whether it is there, its mode and owner, and (for a
    regular file) its text, read up to a cap."""

    path: str
    exists: bool = False
    is_dir: bool = False
    mode: int = 0
    uid: int = 0
    text: str = ""

    @property
    def executable(self) -> bool:
        return self.exists and not self.is_dir and bool(self.mode & 0o111)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What this tool is set up to make (the config and flags doctor runs with)."""

    format: str = "tree"
    output: str | None = None
    filter_dir: str | None = None
    spank_path: str | None = None
    record_dir: str = ""
    metrics: str | None = None
    reconfigure: bool = False


@dataclass(frozen=True, slots=True)
class Currency:
    """Whether a file on disk is what ``generate`` would write now: None = not checked
    (*why* says why), else the paths that differ (empty: current)."""

    stale: list[str] | None
    why: str = ""


@dataclass(frozen=True, slots=True)
class DoctorFacts:
    """Everything the checks read; files by absolute path (the paths :func:`wanted_paths`
    of the analysis asked for)."""

    config: SlurmConfig
    wanted: Wanted
    files: dict[str, FileFacts] = field(default_factory=dict)
    topology: Currency = Currency(None, "no fabric source in the config")
    filters: Currency = Currency(None, "no filter_dir in the config")
    #: the tool's version here and on each node asked (--nodes); None: not asked
    version: str = ""
    node_versions: dict[str, str] | None = None

    def file(self, path: str) -> FileFacts:
        return self.files.get(path) or FileFacts(path)


@dataclass(frozen=True, slots=True)
class Check:
    """One check's verdict: its name, ok/warn/fail, what was found and the line to fix it."""

    name: str
    status: str
    message: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """All verdicts, in check order, and where the facts came from (live or a saved DIR)."""

    checks: list[Check]
    source: str
    release: str | None

    @property
    def failed(self) -> bool:
        return any(check.status == FAIL for check in self.checks)
