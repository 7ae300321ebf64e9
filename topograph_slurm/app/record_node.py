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
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from topograph_slurm.analysis.placement.task_binding import TaskBinding
from topograph_slurm.config import Settings, record_dir
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.counters import NodeCounters
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import Finding


@dataclass(frozen=True, slots=True)
class Hook:
    """Which job and node a hook writes for, and where its parts go."""

    job_id: str
    node: str
    parts: Path  # <record_dir>/job-<ID>.d

    def part(self, name: str) -> Path:
        return self.parts / name


def hook(settings: Settings, job: str | None, node: str | None, env: Mapping[str, str]) -> Hook:
    """The job (``--job``, else ``SLURM_JOB_ID``) and node (``--node``, else
    ``SLURMD_NODENAME``, else the short host name); a job id that is not ASCII digits or a
    node name Slurm would not take is a UsageError (exit 2)."""
    from topograph_slurm.sources.record import parts_dir, record_file

    job_id = job if job is not None else env.get("SLURM_JOB_ID", "")
    record = record_file(record_dir(settings), job_id)  # a UsageError for a bad id
    name = node or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    names.check([name], "node", "--node", error=UsageError)
    return Hook(job_id, name, parts_dir(record))


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


def node_start(settings: Settings, where: Hook, owner: int | None) -> tuple[Path, NodeCounters]:
    """Write ``<node>.start.json`` (the part directory handed to *owner*, the job's uid)."""
    from topograph_slurm.output import make_job_dir, write_file
    from topograph_slurm.sources.record_node import NODE_START, node_part

    reading = read_counters(settings, where.node)
    path = where.part(f"{where.node}.start.json")
    make_job_dir(where.parts, owner)
    text = node_part(NODE_START, where.job_id, where.node, reading, reading.findings)
    write_file(path, text, mode=0o644)
    return path, reading


def node_end(settings: Settings, where: Hook) -> tuple[Path, tuple[Finding, ...]]:
    """Write ``<node>.end.json``: the counters now and every change since the start part
    (without a readable start part: the counters, and a finding saying so)."""
    from topograph_slurm.analysis.record.counters import compare
    from topograph_slurm.output import make_job_dir, write_file
    from topograph_slurm.sources.record_node import NODE_END, node_part

    now = read_counters(settings, where.node)
    start = _start(where)
    changes = compare(start, now, where.node) if isinstance(start, NodeCounters) else (start,)
    found = now.findings + changes
    path = where.part(f"{where.node}.end.json")
    make_job_dir(where.parts)
    write_file(path, node_part(NODE_END, where.job_id, where.node, now, found), mode=0o644)
    return path, found


def _start(where: Hook) -> NodeCounters | Finding:
    """The start part's counters, or the finding that says why there are none."""
    from topograph_slurm.sources.record_node import NODE_START, load_part, reading

    path = where.part(f"{where.node}.start.json")
    try:
        return reading(load_part(path, NODE_START), str(path))
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
    return found, where.part(f"{task}.json")


def task_gpus(env: Mapping[str, str]) -> str | None:
    """The task's GPUs as the node numbers them (topo -m's indices): ``SLURM_STEP_GPUS``, which
    Slurm sets per task to the physical indices (seen on 24.11 and 26.05 in the TaskProlog),
    else ``CUDA_VISIBLE_DEVICES``. With ``ConstrainDevices=yes`` the latter counts the task's
    own devices from 0, so GPU 1 alone reads as 0 there."""
    return env.get("SLURM_STEP_GPUS") or env.get("CUDA_VISIBLE_DEVICES")


def write_task(where: Hook, found: TaskBinding, path: Path) -> None:
    """The task part of :func:`task_binding`'s verdict."""
    from topograph_slurm.output import make_job_dir, write_file
    from topograph_slurm.sources.record_node import task_part

    findings = (found.finding,) if found.finding else ()
    make_job_dir(where.parts)
    text = task_part(where.job_id, where.node, path.stem, found.status, found.detail, findings)
    write_file(path, text, mode=0o644)


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
    from topograph_slurm.app.gres import read_topo_matrix

    if not settings.record_topo_matrix:
        return None, ""
    try:
        return read_topo_matrix(settings.record_topo_matrix), ""
    except InputError as err:
        return None, str(err)


def job_records(
    settings: Settings, since: float, now: float | None = None
) -> tuple[list[Finding], list[str]]:
    """The findings of every node-end part written in the last *since* seconds (by its file
    time), and a line for each part that could not be read."""
    from topograph_slurm.sources.record_node import NODE_END, findings, load_part

    cutoff = (time.time() if now is None else now) - since
    found: list[Finding] = []
    problems: list[str] = []
    for path in sorted(record_dir(settings).glob("job-*.d/*.end.json")):
        try:
            if path.stat().st_mtime < cutoff:
                continue
            found += findings(load_part(path, NODE_END), str(path))
        except (OSError, InputError) as err:
            problems.append(f"{path}: {err.strerror if isinstance(err, OSError) else err}")
    return found, problems
