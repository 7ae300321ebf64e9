"""``record``'s use cases: a job's record written at its start (the PrologSlurmctld hook, with
its gate), the exports a task takes from it (the TaskProlog hook), and records read back to be
shown or compared (docs/record.md).

The hooks' failure policy lives here: a hook never fails a job for its own trouble. What
``record start`` cannot learn (the job, the fabric, a bench record) becomes a finding in the
record it still writes; only the gate refuses a job. ``record task`` imports nothing of the
fabric side: it runs once per task.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from topograph_slurm.config import Settings, record_dir
from topograph_slurm.errors import InputError, OutputError, TopographError
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.record import JobRecord, RecordDiff, RecordPart
from topograph_slurm.model.result import Finding
from topograph_slurm.sources import record as record_files
from topograph_slurm.sources.record import RecordRoot
from topograph_slurm.sources.record import (
    check_job_id as check_job_id,  # re-exported: record start checks the id first
)

#: Where a warning line goes (the CLI's stderr).
Warn = Callable[[str], None]

if TYPE_CHECKING:
    from topograph_slurm.analysis.record.build import RecordStart
    from topograph_slurm.output import Access

#: Where the layout's TP came from (the record's ``layout.source``).
FROM_ADMIN_COMMENT = "admin-comment"
FROM_GPUS_PER_NODE = "gpus-per-node"


@dataclass(frozen=True, slots=True)
class StartRequest:
    """One ``record start``: the job, Slurm's restart count (SLURM_JOB_RESTART_COUNT as
    given, may be empty), the topology file Slurm runs (for its sha256, and placed from when
    no fabric source is configured)."""

    job_id: str
    restart_count: str = ""
    topology: str | None = None
    #: the job's uid (SLURM_JOB_UID): the one other reader of a private record
    job_uid: int | None = None


@dataclass(frozen=True, slots=True)
class Started:
    """What ``record start`` did: the record and where it went, what went wrong (the
    write, the hold of a refused job; empty: nothing), the gate's refusal (empty: the
    job may run) and whether the refused job is held (``scontrol requeuehold`` done)."""

    record: JobRecord
    path: Path | None
    trouble: str = ""
    held: bool = False

    @property
    def refused(self) -> str:
        return self.record.refused


def start(settings: Settings, request: StartRequest, warn: Warn) -> Started:
    """The job's record, written once for this start (a requeued job's rewrites the last):
    a job id that is no number is a usage error and nothing is written; any other trouble is
    recorded as a finding (or, when even the write fails, returned) and the job runs. A job
    the gate refuses is requeued and held here (``scontrol requeuehold``), so the hook may
    then succeed: Slurm's own requeue of a failed PrologSlurmctld would come second (docs/
    record.md)."""
    job_id = record_files.check_job_id(request.job_id)
    path = record_files.record_file(record_dir(settings), job_id)
    record = _record(settings, request, warn)
    written: Path | None = path
    troubles = []
    try:
        _write(settings, path, record, access(settings, request.job_uid))
    except (OutputError, InputError) as err:
        written = None
        troubles.append(f"record not written: {err}")
    held = False
    if record.refused:
        unheld = _hold(settings, job_id)
        held = not unheld
        troubles += unheld
    return Started(record, written, "; ".join(troubles), held)


def _hold(settings: Settings, job_id: str) -> list[str]:
    """The refused job requeued and held (what Slurm would not do on its own); why not
    (empty: held). ``requeuehold`` is synchronous: when it returns, the job is pending."""
    from topograph_slurm.slurm.jobs import requeue_hold
    from topograph_slurm.slurm.scontrol import Scontrol

    try:
        requeue_hold(Scontrol.from_settings(settings), job_id)
    except TopographError as err:
        return [f"not held (Slurm requeues it and retries): {err}"]
    return []


def _record(settings: Settings, request: StartRequest, warn: Warn) -> JobRecord:
    from topograph_slurm.analysis.record.build import RecordStart, incomplete_record

    topology_sha, topology_trouble = _topology_sha(request.topology)
    begun = RecordStart(
        request.job_id,
        natural(request.restart_count) or 0,
        datetime.now(UTC).isoformat(timespec="seconds"),
        request.topology or "",
        topology_sha,
    )
    try:
        record = _placed_record(settings, request, begun, warn)
    except TopographError as err:
        return incomplete_record(begun, f"the job could not be placed: {err}")
    if topology_trouble:
        from topograph_slurm.analysis.record.build import incomplete

        findings = [*record.findings, incomplete(begun.job_id, topology_trouble)]
        record = dataclasses.replace(record, findings=findings)
    return record


def _placed_record(
    settings: Settings, request: StartRequest, begun: RecordStart, warn: Warn
) -> JobRecord:
    """The job read from Slurm, placed on the view explain uses and judged; TP from the
    --tp-size record, else one node's GPUs."""
    from topograph_slurm.analysis.record.build import build_record
    from topograph_slurm.analysis.record.gate import refusal
    from topograph_slurm.app import placement
    from topograph_slurm.app.fabric import given_sources
    from topograph_slurm.model.placement import ParallelLayout
    from topograph_slurm.model.record import RecordLayout

    slurm_job = placement.slurm_job_of(settings, begun.job_id)
    # a fabric source places (rates and health too); --topology is then only hashed
    topology = None if given_sources(settings) else request.topology
    flags = placement.JOB_DEFAULTS
    placed = placement.prepare_job(settings, topology, slurm_job.job_id, flags, warn, slurm_job)
    source = FROM_ADMIN_COMMENT
    if slurm_job.tp is None:  # no --tp-size record: a TP group is taken as one node's GPUs
        source = FROM_GPUS_PER_NODE
        layout = ParallelLayout.for_world(len(placed.ranks), placed.gpus)
        placed = dataclasses.replace(placed, layout=layout)
    explanation = placement.explanation(placed)
    bench, notes = _bench(settings, begun.job_id)
    view = placed.view
    return build_record(
        begun,
        explanation,
        view.fmap,
        view.facts,
        RecordLayout(placed.layout.tp, placed.layout.pp, placed.gpus, source),
        bench,
        refusal(settings.record_refuse, explanation),
        notes,
    )


def _bench(settings: Settings, job_id: str) -> tuple[dict[str, float], list[Finding]]:
    """The configured bench record's level medians; a record that will not read is a note."""
    if not settings.record_bench:
        return {}, []
    from topograph_slurm.analysis.record.build import incomplete
    from topograph_slurm.sources.snapshot import load_bench

    try:
        return load_bench(settings.record_bench).medians, []
    except InputError as err:
        return {}, [incomplete(job_id, f"no bench medians: {err}")]


def _topology_sha(topology: str | None) -> tuple[str, str]:
    """The sha256 of the topology file named, and why there is none when it cannot be read."""
    if not topology:
        return "", ""
    try:
        return hashlib.sha256(Path(topology).read_bytes()).hexdigest(), ""
    except OSError as err:
        return "", f"no topology sha256: cannot read {topology}: {err.strerror}"


def _write(settings: Settings, path: Path, record: JobRecord, how: Access) -> None:
    """The record, then its export file (what every task reads), each written atomically in
    the checked record root; readable by everyone, or by the job's user only (*how*)."""
    from topograph_slurm.output import write_at
    from topograph_slurm.render.record import exports, one_line, unit_rows

    variables = [(name, one_line(value)) for name, value in exports(path, record)]
    small = record_files.JobExports(record.job_id, variables, unit_rows(record))
    with writable_root(settings) as root:
        write_at(root.fd, path.name, record_files.encode(record), str(path), how)
        name = record_files.exports_name(record.job_id)
        write_at(root.fd, name, record_files.encode_exports(small), str(root.path / name), how)


def access(settings: Settings, job_uid: int | None) -> Access:
    """Who reads what a hook writes for a job: everyone, or with ``record_private`` only the
    job's user (*job_uid*; unknown: nobody but root and the writer)."""
    from topograph_slurm.output import Access

    if not settings.record_private:
        return Access()
    return Access(job_uid if job_uid is not None else os.geteuid())


def writable_root(settings: Settings) -> RecordRoot:
    """The record root, made when missing (mode 0755, this hook's own) and checked
    (docs/record.md, "Trust model"); an InputError when it is not trusted, an OutputError
    when this hook is not one of its writers (root, the root's owner)."""
    from topograph_slurm.output import make_record_root

    directory = record_dir(settings)
    make_record_root(directory, None)
    root = record_files.open_root(directory)
    if os.geteuid() not in root.writers:
        root.__exit__(None, None, None)
        raise OutputError(
            f"record_dir {directory} belongs to another user: this hook (uid {os.geteuid()}) "
            "may not write there (hooks install gives it to SlurmUser)"
        )
    return root


def task_exports(settings: Settings, job_id: str, node: str) -> tuple[Path, list[tuple[str, str]]]:
    """The variables a task on *node* exports: the small export file ``record start`` wrote
    beside the record (never the record itself, whose size grows with the job's nodes), with
    the node's own block, leaf and NVLink domain where the record knows them. An InputError
    when the id is no number or the file is missing, unreadable or not written by root or the
    record's writer (the TaskProlog then says so and lets the task run)."""
    try:
        record_files.check_job_id(job_id)
    except TopographError as err:
        raise InputError(str(err)) from None
    try:
        with record_files.open_root(record_dir(settings)) as root:
            path, found = record_files.read_exports(root, job_id)
    except InputError as err:
        raise InputError(f"no job record to export: {err}") from None
    from topograph_slurm.render.record import node_units

    return path, [*found.variables, *node_units(found.units, node)]


def read_side(settings: Settings, spec: str) -> tuple[JobRecord, tuple[RecordPart, ...]]:
    """A record named by a job id (in ``record_dir``) or a file path, with the node and task
    parts its job's hooks wrote beside it (``job-<ID>.d/``; none when no hook ran there)."""
    from topograph_slurm.sources.record_node import read_parts

    if natural(spec) is not None:  # in record_dir: trusted only from its writers
        with record_files.open_root(record_dir(settings)) as root:
            path, found = record_files.read_job_record(root, spec)
            return found, read_parts(root.fd, record_files.parts_dir(path), root.writers)
    path = Path(spec)  # a file named: shown as it is, its parts beside it whoever wrote them
    found = record_files.read_record(path)
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return found, ()
    try:
        return found, read_parts(parent, record_files.parts_dir(path), None)
    finally:
        os.close(parent)


def compare(settings: Settings, a: str, b: str) -> RecordDiff:
    """Records *a* and *b* (job ids or files) compared, their parts with them."""
    from topograph_slurm.analysis.record.diff import diff_records

    (record_a, parts_a), (record_b, parts_b) = read_side(settings, a), read_side(settings, b)
    return diff_records(record_a, record_b, a, b, parts_a, parts_b)
