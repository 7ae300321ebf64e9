"""A job as Slurm holds it, from ``scontrol show job --json``: its nodes in rank order, its
state, GPUs per node and the ``--tp-size`` record the filter left in AdminComment.

Field names checked on 24.11.5 and 26.05.5 (tests/integration/test_slurm_job_sources.py records
both): ``jobs[].job_id`` (a number), ``job_state`` (a list: ``["RUNNING"]``), ``nodes`` (a
hostlist, ``""`` while pending), ``job_resources.nodes.allocation[].{index,name}`` (absent,
``null``, while pending), ``gres_detail`` (one ``gpu:4(IDX:0-3)`` per node, also for an
exclusive job that asked for no GPUs), ``tres_per_node`` (``gres/gpu:4`` for ``--gres=gpu:4``
and ``--gpus-per-node=4``), ``admin_comment`` (``""`` when unset). An unknown job id gives
``"jobs": []`` and exit 0 on both. ``scontrol show jobs --json`` lists every job the same way;
a pending job has ``node_count`` as ``{"set": true, "infinite": false, "number": 4}`` on both,
and ``segment_size`` (``--segment``) on 26.05 only (24.11 prints null).
"""

from __future__ import annotations

import functools
import re

from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.job import SlurmJob, parse_tp_record
from topograph_slurm.model.occupancy import QueueJob
from topograph_slurm.slurm.schema import Job, Jobs, Number, SetNumber, decode
from topograph_slurm.slurm.scontrol import Scontrol, whole

#: A job id scontrol takes: ``123``, an array task ``123_4``, a het component ``123+1``.
_JOB_ID = re.compile(r"\A\d+(?:[_+]\d+)?\Z", re.ASCII)
#: GPUs of one node in ``gres_detail`` (``gpu:4(IDX:0-3)``, typed ``gpu:h100:4(IDX:0-3)``).
_GRES_GPUS = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:(\d+)", re.ASCII)
#: GPUs per node in ``tres_per_node`` (``gres/gpu:4``, ``gres/gpu:h100:4``, ``gres/gpu=4``).
_TRES_GPUS = re.compile(r"(?:^|,)gres/gpu(?::[^:=,]+)?[:=](\d+)", re.ASCII)


def parse_scontrol_job(data: bytes | str, job_id: str) -> SlurmJob:
    """Job *job_id* from ``scontrol show job --json <job_id>`` output (an array job's own
    task, else the first listed); an input error when Slurm lists no such job."""
    command = "scontrol show job --json"
    listed = decode(data, command, Jobs).jobs
    if not listed:
        raise InputError(f"job {job_id} not found: scontrol show job lists no such job")
    job = next((j for j in listed if str(j.job_id) == job_id), listed[0])
    try:
        return SlurmJob(
            str(job.job_id),
            _state(job.job_state),
            tuple(_job_nodes(job)),
            _gpus_per_node(job),
            parse_tp_record(job.admin_comment or ""),
        )
    except ValueError as err:
        raise InputError(f"unexpected `{command}` output: {err}") from None


def scontrol_job(scontrol: Scontrol, job_id: str) -> SlurmJob:
    """Run ``scontrol show job --json <job_id>`` and read the job."""
    job_id = job_id.strip()
    if not _JOB_ID.match(job_id):
        raise UsageError(f"invalid job id {job_id!r}: expected a number such as 1234 or 1234_5")
    return parse_scontrol_job(scontrol.output(["show", "job", "--json", job_id]), job_id)


def parse_scontrol_jobs(data: bytes | str) -> list[QueueJob]:
    """Every job ``scontrol show jobs --json`` lists, running and pending: nodes in rank
    order, partitions, node count (``node_count``: a number, or 24.11's ``{"number": N}``),
    GPUs per node and the ``--tp-size`` record (what occupancy needs)."""
    command = "scontrol show jobs --json"
    try:
        return [_queue_job(job) for job in decode(data, command, Jobs).jobs]
    except ValueError as err:
        raise InputError(f"unexpected `{command}` output: {err}") from None


def scontrol_jobs(scontrol: Scontrol) -> list[QueueJob]:
    """Run ``scontrol show jobs --json`` and read every job."""
    return parse_scontrol_jobs(scontrol.output(["show", "jobs", "--json"]))


def _queue_job(job: Job) -> QueueJob:
    partitions = job.partition or ""
    segment = _number(job.segment_size)
    return QueueJob(
        str(job.job_id),
        _state(job.job_state),
        tuple(_job_nodes(job)),
        tuple(part for part in partitions.split(",") if part),
        max(1, _number(job.node_count) or 1),
        _gpus_per_node(job),
        segment or None,
        parse_tp_record(job.admin_comment or ""),
    )


def _number(value: SetNumber | Number | None) -> int:
    """A whole number, or the ``number`` of 24.11's ``{"set": true, "number": N}``; 0 unset."""
    if isinstance(value, SetNumber):
        return whole(value.number) if value.set else 0
    return 0 if value is None else whole(value)


@functools.lru_cache(maxsize=1024)
def gres_gpus(text: str) -> int:
    """The GPUs a gres string counts (``gpu:4``, ``gpu:h100:4(S:0-1)``, ``gpu:2(IDX:0-1)``).
    Cached: a cluster's thousands of nodes and jobs print a handful of distinct strings."""
    return sum(int(n) for n in _GRES_GPUS.findall(text))


def _state(value: list[str] | str | None) -> str:
    """``["RUNNING"]`` (24.11, 26.05; flags such as ``COMPLETING`` follow) or a plain string."""
    if isinstance(value, list):
        return "+".join(value)
    return value or "UNKNOWN"


def _job_nodes(job: Job) -> list[str]:
    """The allocation list in Slurm's order; the ``nodes`` hostlist (sorted by name) when a
    finished job no longer has one."""
    held = job.job_resources.nodes if job.job_resources else None
    allocation = (held.allocation if held else None) or []
    if allocation:
        ordered = sorted(allocation, key=lambda node: whole(node.index))
        return [node.name for node in ordered]
    hostlist = job.nodes or ""
    return names.expand(hostlist, "scontrol show job") if hostlist else []


def _gpus_per_node(job: Job) -> int | None:
    """GPUs each node holds: the allocated ``gres_detail`` when all nodes agree, else the
    request ``tres_per_node``; None without GPUs or when nodes hold different counts."""
    counts = {gres_gpus(entry) for entry in job.gres_detail or []}
    if len(counts) == 1 and min(counts) > 0:
        return counts.pop()
    if len(counts) > 1:
        return None
    found = _TRES_GPUS.findall(job.tres_per_node or "")
    return sum(int(n) for n in found) or None


def requeue_hold(scontrol: Scontrol, job_id: str) -> None:
    """``scontrol requeuehold <job_id>``: the job back to pending, held (priority 0), when
    it returns. From the PrologSlurmctld that refuses a job, which then exits 0: Slurm's own
    requeue of a failed one is unheld, retried after its requeue delay again and again
    (24.11, 26.05); held, the job waits for an admin's or the user's ``scontrol release``.
    A collect error when Slurm refuses."""
    if not _JOB_ID.match(job_id):
        raise UsageError(f"invalid job id {job_id!r}: expected a number such as 1234")
    scontrol.run(["requeuehold", job_id])


#: The ``state_reason`` of a job whose Prolog runs: measured on 24.11.5 with
#: ``PrologFlags=Alloc,DeferBatch``, such a job is ``["RUNNING"]`` with reason ``Prolog``
#: (``squeue``: ``RUNNING Prolog``), not ``CONFIGURING``, which marks one whose nodes boot.
PROLOG_REASON = "Prolog"
#: The state flag Slurm sets while a job's nodes get ready (booting, or its prolog on
#: releases that flag it): either way its batch launch is still to come.
CONFIGURING = "CONFIGURING"


def parse_in_prolog(text: bytes | str) -> list[str]:
    """The ids of the jobs ``scontrol show jobs --json`` shows in their prolog (state flag
    CONFIGURING or reason Prolog): their batch launch is still deferred."""
    jobs = decode(text, "scontrol show jobs --json", Jobs).jobs
    return [str(job.job_id) for job in jobs if _in_prolog(job)]


def _in_prolog(job: Job) -> bool:
    """CONFIGURING, or RUNNING with reason Prolog: a job cancelled in its prolog keeps the
    reason (seen on 24.11.5) but has no launch left to lose."""
    state = _state(job.job_state).split("+")
    return CONFIGURING in state or (state[0] == "RUNNING" and job.state_reason == PROLOG_REASON)


def jobs_in_prolog(scontrol: Scontrol) -> list[str]:
    """Run ``scontrol show jobs --json`` and name the jobs in their prolog."""
    return parse_in_prolog(scontrol.output(["show", "jobs", "--json"]))
