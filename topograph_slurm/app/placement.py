"""``explain``'s and ``order``'s use case: a job's nodes, GPUs per node and parallel layout
read from Slurm (a job id) or flags, placed on the fabric view; its groups explained, or a
better node order found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topograph_slurm.app.fabric import Warn
from topograph_slurm.app.view import FabricView, from_settings
from topograph_slurm.config import Settings
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.job import SlurmJob
from topograph_slurm.model.placement import ParallelLayout
from topograph_slurm.slurm.scontrol import Scontrol

if TYPE_CHECKING:
    from topograph_slurm.analysis.placement.explain import Explanation

#: The most GPUs (ranks) a node is taken to hold: more than any server or tray has.
MAX_GPUS_PER_NODE = 1024


@dataclass(slots=True)
class PlacedJob:
    """A job on a fabric view: its nodes in rank order, GPUs per node and layout."""

    view: FabricView
    order: list[str]
    gpus: int
    layout: ParallelLayout


def prepare_job(
    settings: Settings,
    topology: str | None,
    job_id: str | None,
    job: Mapping[str, Any],
    warn: Warn,
) -> PlacedJob:
    """The fabric view, the node order, GPUs per node and the layout. A job id gives the
    nodes in the order Slurm ranks them, GPUs per node and (from the filter's record) the TP
    size, unless the *job* flags say otherwise."""
    slurm_job = _slurm_job(settings, job_id) if job_id else None
    view = from_settings(settings, topology, warn, running=slurm_job is not None)
    if slurm_job is not None and not (job["hostlist"] or job["hostfile"]):
        order = list(slurm_job.nodes)
    else:
        order = _node_order(job["hostlist"], job["hostfile"])
    gpus = _gpus_per_node(job["gpus_per_node"], slurm_job, view)
    tp = job["tp"] if job["tp"] is not None else (slurm_job and slurm_job.tp) or 1
    layout = ParallelLayout.for_world(
        len(order) * gpus, tp, job["pp"], job["cp"], job["ep"], job["rank_order"]
    )
    return PlacedJob(view, order, gpus, layout)


def _gpus_per_node(flag: int | None, slurm_job: SlurmJob | None, view: FabricView) -> int:
    """GPUs (ranks) per node: the flag, else the job's, else the fabric's; a flag outside
    1..MAX_GPUS_PER_NODE is a usage error, a job's an input error (no node holds more, and a
    layout that large would take a loop over every rank to refuse)."""
    if flag is not None:
        if not 1 <= flag <= MAX_GPUS_PER_NODE:
            raise UsageError(f"--gpus-per-node must be 1 to {MAX_GPUS_PER_NODE}, got {flag}")
        return flag
    gpus = (slurm_job and slurm_job.gpus_per_node) or view.gpus_per_node
    if not gpus:
        raise UsageError("--gpus-per-node is needed: neither the job nor the fabric says")
    if gpus > MAX_GPUS_PER_NODE:
        raise InputError(
            f"the job's nodes hold {gpus} GPUs each, more than any node can "
            f"({MAX_GPUS_PER_NODE}); pass --gpus-per-node"
        )
    return gpus


def _node_order(hostlist: str | None, hostfile: str | None) -> list[str]:
    if hostfile:
        try:
            lines = Path(hostfile).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read hostfile {hostfile}: {err}") from None
        order = [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]
        if not order:
            raise InputError(f"hostfile {hostfile} names no node")
        names.check(order, "node", f"hostfile {hostfile}")
        return list(dict.fromkeys(order))
    if not hostlist:
        raise UsageError("give the job's nodes: --nodes HOSTLIST or --hostfile FILE")
    return names.expand(hostlist, "--nodes", UsageError)


def _slurm_job(settings: Settings, job_id: str) -> SlurmJob:
    from topograph_slurm.slurm.jobs import scontrol_job

    job = scontrol_job(Scontrol.from_settings(settings), job_id)
    if not job.nodes:
        raise InputError(
            f"job {job.job_id} has no nodes yet ({job.state}): explain it once it runs"
        )
    return job


def explanation(job: PlacedJob, nodes: list[str] | None = None) -> Explanation:
    """Where the job's groups sit when its ranks are laid on *nodes* (default: its order)."""
    from topograph_slurm.analysis.placement.explain import explain

    view = job.view
    return explain(job.layout, nodes or job.order, job.gpus, view.fmap, view.facts)


def better_order(job: PlacedJob) -> tuple[list[str], Explanation]:
    """A node order that keeps each kind of group on its fastest links (nodes with health
    findings last), and how the groups sit in it."""
    from topograph_slurm.analysis.placement.order import best_order

    view = job.view
    unhealthy = set(view.facts.problems) if view.facts else set()
    chosen = best_order(job.layout, job.order, job.gpus, view.fmap, unhealthy)
    return chosen.nodes, explanation(job, chosen.nodes)
