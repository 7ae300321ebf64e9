"""The node side of the job record: what Slurm's Prolog, Epilog and TaskProlog run on every
node. ``node_start`` keeps the node's link counters at job start, ``node_end`` reads them
again at job end and names every link that took errors or degraded, ``task_binding`` checks
one task's CPUs against its GPUs. ``job_records`` hands the end parts to ``health``.

The hooks' failure policy: their own trouble (no sysfs, no start part, an unreadable topo -m)
is a finding in the part they write, never an exception; only what keeps them from writing
at all (a bad job id, an unwritable record directory) raises.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from topograph_slurm.analysis.placement.task_binding import TaskBinding
from topograph_slurm.config import Settings, record_dir
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.counters import NodeCounters
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import Finding
from topograph_slurm.sources.record import TASKS_DIR

if TYPE_CHECKING:
    from topograph_slurm.sources.record import RecordRoot


@dataclass(frozen=True, slots=True)
class Hook:
    """Which job and node a hook writes for, where its parts go, and the job's uid (the
    Prolog hands the tasks' directory to it; a private record's one other reader)."""

    job_id: str
    node: str
    parts: Path  # <record_dir>/job-<ID>.d
    job_uid: int | None = None

    def part(self, name: str) -> Path:
        return self.parts / name


def hook(settings: Settings, job: str | None, node: str | None, env: Mapping[str, str]) -> Hook:
    """The job (JOBID, else ``SLURM_JOB_ID``) and node (``--this-node``, else
    ``SLURMD_NODENAME``, else the short host name); a job id that is not ASCII digits or a
    node name Slurm would not take is a UsageError (exit 2)."""
    from topograph_slurm.sources.record import parts_dir, record_file

    job_id = job if job is not None else env.get("SLURM_JOB_ID", "")
    record = record_file(record_dir(settings), job_id)  # a UsageError for a bad id
    name = this_node(node, env)
    names.check([name], "node", "--this-node", error=UsageError)
    return Hook(job_id, name, parts_dir(record), natural(env.get("SLURM_JOB_UID", "")))


def this_node(node: str | None, env: Mapping[str, str]) -> str:
    """The node a hook runs for: ``--node``, else ``SLURMD_NODENAME``, else the short host
    name."""
    return node or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


_ROOT = frozenset({0})


@contextmanager
def _job_dir(settings: Settings, where: Hook) -> Iterator[int]:
    """The job's part directory (``job-<ID>.d``) in the checked record root, made by this
    hook when missing, refused when something else is there (docs/record.md, "Trust
    model"); with the Prolog's owner, the tasks' directory inside, handed to the job's user."""
    from topograph_slurm.app.record import access, writable_root
    from topograph_slurm.output import make_dir_at

    how = access(settings, where.job_uid)
    with writable_root(settings) as root:
        fd = make_dir_at(
            root.fd, where.parts.name, str(where.parts), owners=root.writers, access=how
        )
        try:
            yield fd
        finally:
            os.close(fd)


def read_counters(settings: Settings, node: str) -> NodeCounters:
    """This node's HCA ports (sysfs) and NVLinks (nvidia-smi, where one exists) now."""
    from topograph_slurm.collect.nvlink import nvlink_errors
    from topograph_slurm.sources.link_counters import parse_nvlink_errors, read_sysfs

    reading = read_sysfs(Path(settings.infiniband_sysfs), node)
    text, why = nvlink_errors()
    if why:
        missing = Finding(FindingKind.RECORD_INCOMPLETE, node, f"no NVLink counters: {why}")
        return replace(reading, findings=(*reading.findings, missing))
    return replace(reading, nvlinks=parse_nvlink_errors(text)) if text else reading


def node_start(settings: Settings, where: Hook) -> tuple[Path, NodeCounters]:
    """Write ``<node>.start.json``, and make ``tasks/`` for the job's user (its tasks write
    their binding parts there, the one place under the record root they may write)."""
    from topograph_slurm.app.record import access
    from topograph_slurm.output import Access, make_dir_at, write_at
    from topograph_slurm.sources.record import TASKS_DIR
    from topograph_slurm.sources.record_node import NODE_START, node_part

    reading = read_counters(settings, where.node)
    path = where.part(f"{where.node}.start.json")
    text = node_part(NODE_START, where.job_id, where.node, reading, reading.findings)
    how = access(settings, where.job_uid)
    with _job_dir(settings, where) as fd:
        write_at(fd, path.name, text.encode(), str(path), how)
        uid = where.job_uid
        if uid is not None and os.geteuid() in (0, uid):  # the job's user may not be handed one
            tasks = where.part(TASKS_DIR)
            how = Access() if how.reader is None else Access(uid)
            made = make_dir_at(fd, TASKS_DIR, str(tasks), owners=_ROOT, access=how, hand_to=uid)
            os.close(made)
    return path, reading


def node_end(settings: Settings, where: Hook) -> tuple[Path, tuple[Finding, ...]]:
    """Write ``<node>.end.json``: the counters now and every change since the start part
    (without a readable start part: the counters, and a finding saying so)."""
    from topograph_slurm.analysis.record.counters import compare
    from topograph_slurm.app.record import access
    from topograph_slurm.output import write_at
    from topograph_slurm.sources.record_node import NODE_END, node_part

    now = read_counters(settings, where.node)
    path = where.part(f"{where.node}.end.json")
    how = access(settings, where.job_uid)
    with _job_dir(settings, where) as fd:
        start = _start(where, fd, frozenset({0, os.geteuid()}))
        changes = compare(start, now, where.node) if isinstance(start, NodeCounters) else (start,)
        found = now.findings + changes
        text = node_part(NODE_END, where.job_id, where.node, now, found)
        write_at(fd, path.name, text.encode(), str(path), how)
    return path, found


def _start(where: Hook, directory: int, owners: frozenset[int]) -> NodeCounters | Finding:
    """The start part's counters (written by the Prolog: owned by root or this hook's user),
    or the finding that says why there are none."""
    from topograph_slurm.sources.record_node import NODE_START, load_part, reading

    path = where.part(f"{where.node}.start.json")
    try:
        return reading(load_part(directory, path.name, path, owners, NODE_START), str(path))
    except InputError as err:
        message = f"no start counters to compare ({err})"
        return Finding(FindingKind.RECORD_INCOMPLETE, where.node, message)


def task_binding(
    settings: Settings, where: Hook, env: Mapping[str, str]
) -> tuple[TaskBinding, Path]:
    """Check this process's binding (the TaskProlog runs with the task's own affinity and
    ``CUDA_VISIBLE_DEVICES``) and write ``task-<step>.<proc>.json``. The verdict is returned
    before the write can fail (the caller still exports it), in the tuple with the path."""
    from topograph_slurm.analysis.placement.task_binding import check

    task = f"task-{_task_id(env)}"
    topo, why = _topology(settings)
    allowed = os.sched_getaffinity(0)
    node_cpus = range(os.cpu_count() or len(allowed))
    found = check(allowed, node_cpus, task_gpus(env), topo, f"{where.node}/{task}")
    if why:
        found = replace(found, detail=f"{found.detail} ({why})")
    return found, where.part(TASKS_DIR) / f"{task}.json"


def task_gpus(env: Mapping[str, str]) -> str | None:
    """The task's GPUs as the node numbers them (topo -m's indices): ``SLURM_STEP_GPUS``, which
    Slurm sets per task to the physical indices (seen on 24.11 and 26.05 in the TaskProlog),
    else ``CUDA_VISIBLE_DEVICES``. With ``ConstrainDevices=yes`` the latter counts the task's
    own devices from 0, so GPU 1 alone reads as 0 there."""
    return env.get("SLURM_STEP_GPUS") or env.get("CUDA_VISIBLE_DEVICES")


def write_task(settings: Settings, where: Hook, found: TaskBinding, path: Path) -> None:
    """The task part of :func:`task_binding`'s verdict, written as the job's user into
    ``job-<ID>.d/tasks/`` (which the Prolog made and handed to it): the job's part directory
    must be root's or the record writer's, ``tasks/`` this user's own, else nothing is
    written. Root-run readers never trust what is there."""
    from topograph_slurm.output import Access, write_at
    from topograph_slurm.sources.record import open_dir_at, open_root
    from topograph_slurm.sources.record_node import task_part

    findings = (found.finding,) if found.finding else ()
    text = task_part(where.job_id, where.node, path.stem, found.status, found.detail, findings)
    how = Access(os.geteuid()) if settings.record_private else Access()
    with open_root(record_dir(settings)) as root:
        job = open_dir_at(root.fd, where.parts.name, root.writers, str(where.parts))
        try:
            mine = frozenset({os.geteuid()})
            tasks = open_dir_at(job, TASKS_DIR, mine, str(path.parent))
        finally:
            os.close(job)
        try:
            write_at(tasks, path.name, text.encode(), str(path), how)
        finally:
            os.close(tasks)


def _task_id(env: Mapping[str, str]) -> str:
    """``<step>.<proc>`` from SLURM_STEP_ID and SLURM_PROCID (a batch step's id may be a
    word, ``batch``); anything else is a UsageError."""
    step, proc = env.get("SLURM_STEP_ID", "0"), env.get("SLURM_PROCID", "0")
    if natural(proc) is None or not (
        natural(step) is not None or (step.isalpha() and step.isascii())
    ):
        raise UsageError(
            f"SLURM_STEP_ID {step!r} / SLURM_PROCID {proc!r} are not a step and a task"
        )
    return f"{step}.{proc}"


def _topology(settings: Settings) -> tuple[GpuTopology | None, str]:
    """This node's topo -m (``record_topo_matrix``), or None and why."""
    from topograph_slurm.sources.node_captures import read_topo_matrix

    if not settings.record_topo_matrix:
        return None, ""
    try:
        return read_topo_matrix(settings.record_topo_matrix), ""
    except InputError as err:
        return None, str(err)


#: What an Epilog's part may tell ``health``: the node-end kinds, each at most degraded.
NODE_END_KINDS = frozenset(
    {
        FindingKind.LINK_ERRORS_DURING_JOB,
        FindingKind.LINK_DEGRADED_DURING_JOB,
        FindingKind.NVLINK_ERRORS_DURING_JOB,
        FindingKind.LINK_COUNTERS_RESET,
        FindingKind.RECORD_INCOMPLETE,
    }
)
_JOB_DIR = re.compile(r"job-([0-9]+)\.d")


def job_records(
    settings: Settings, since: float, now: float | None = None
) -> tuple[list[Finding], list[str]]:
    """The findings of every node-end part written in the last *since* seconds (by its file
    time), and a line for each part that could not be read or was not trusted. Only parts
    root (or the record's writer) wrote, in job directories it made, are read; only the
    node-end kinds are taken, each about the part's own node, at the level the catalogue
    gives it: a part can degrade its node, never drain it or name another."""
    from topograph_slurm.sources.record import open_root

    cutoff = (time.time() if now is None else now) - since
    found: list[Finding] = []
    problems: list[str] = []
    try:
        root = open_root(record_dir(settings))
    except InputError as err:
        return [], [str(err)]
    with root:
        for name in sorted(os.listdir(root.fd), key=names.natural_key):
            match = _JOB_DIR.fullmatch(name)
            if match:
                _job_parts(root, match.group(1), cutoff, found, problems)
    return found, problems


def _job_parts(
    root: RecordRoot, job_id: str, cutoff: float, found: list[Finding], problems: list[str]
) -> None:
    from topograph_slurm.sources.record import open_dir_at
    from topograph_slurm.sources.record_node import NODE_END, load_part

    where = root.path / f"job-{job_id}.d"
    try:
        fd = open_dir_at(root.fd, where.name, root.writers, str(where))
    except InputError as err:
        problems.append(str(err))
        return
    try:
        for name in sorted(os.listdir(fd), key=names.natural_key):
            node = name.removesuffix(".end.json")
            if node == name or name.startswith("."):
                continue
            path = where / name
            try:
                if os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime < cutoff:
                    continue
                data = load_part(fd, name, path, root.writers, NODE_END)
                found += _own_findings(data, node, job_id, str(path))
            except (OSError, InputError) as err:
                problems.append(f"{path}: {err.strerror if isinstance(err, OSError) else err}")
    finally:
        os.close(fd)


def _own_findings(data: Mapping[str, object], node: str, job_id: str, where: str) -> list[Finding]:
    """A node-end part's findings as ``health`` may take them: the part must be about the node
    and job its name says; each finding of a node-end kind, about that node only, its level
    the catalogue's (whatever the file claims)."""
    from topograph_slurm.sources.record_node import findings

    if data.get("node") != node or data.get("job_id") != job_id:
        raise InputError(
            f"{where}: written for node {data.get('node')!r} of job "
            f"{data.get('job_id')!r}, not {node} of job {job_id}"
        )
    names.check([node], "node", where)
    kinds = {kind.value: kind for kind in NODE_END_KINDS}
    return [
        _about_node(kinds[f.kind], f, node)
        for f in findings(data, where)
        if f.kind in kinds and (f.subject == node or f.subject.startswith(f"{node}/"))
    ]


def _about_node(kind: FindingKind, found: Finding, node: str) -> Finding:
    """*found* as the catalogue's *kind* (its level, not the file's) about *node*."""
    return Finding(kind, found.subject, found.message, nodes=(node,))
