"""``explain``'s and ``order``'s use case: a job's nodes, GPUs per node and parallel layout
read from Slurm (a job id) or flags, placed on the fabric view; its groups explained, or a
better node order found."""

from __future__ import annotations

from collections import Counter
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
from topograph_slurm.model.placement import MEGATRON_ORDER, PER_NODE, ParallelLayout
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.sources.hostfile import Hostfile, parse_hostfile

if TYPE_CHECKING:
    from topograph_slurm.analysis.placement.explain import Explanation

#: The most GPUs (ranks) a node is taken to hold: more than any server or tray has.
MAX_GPUS_PER_NODE = 1024


@dataclass(slots=True)
class PlacedJob:
    """A job on a fabric view: its nodes in rank order, GPUs (ranks) per node (the most any
    node runs), the layout, the node of every rank, and where the ranks were read from."""

    view: FabricView
    order: list[str]
    gpus: int
    layout: ParallelLayout
    ranks: list[str]
    ranks_from: str


#: prepare_job's *job* flags as explain's defaults leave them: a job id's nodes (no hostlist,
#: no hostfile), its GPUs per node and --tp-size/--pp-size record, nothing else parallel,
#: Megatron's order. Callers that read a job without flags (record, pools) start from these.
JOB_DEFAULTS: Mapping[str, Any] = {
    "hostlist": None,
    "hostfile": None,
    "hostfile_lines": "auto",
    "gpus_per_node": None,
    "tp": None,
    "pp": None,
    "cp": 1,
    "ep": 1,
    "etp": None,
    "rank_order": MEGATRON_ORDER,
}


def prepare_job(
    settings: Settings,
    topology: str | None,
    job_id: str | None,
    job: Mapping[str, Any],
    warn: Warn,
    slurm_job: SlurmJob | None = None,
    kept: bool = True,
) -> PlacedJob:
    """The fabric view, the node of every rank, GPUs per node and the layout. A job id gives
    the nodes in the order Slurm ranks them, GPUs per node and (from the filter's record) the
    TP and PP sizes, unless the *job* flags say otherwise; *slurm_job* is that job when the caller
    has read it already. A node the fabric does not place is an input error. With *kept* a
    fabric source's kept index stands in for its analysis (:func:`.view.from_kept`)."""
    if slurm_job is None and job_id:
        slurm_job = slurm_job_of(settings, job_id)
    view = from_settings(settings, topology, warn, running=slurm_job is not None, kept=kept)
    if slurm_job is not None and not (job["hostlist"] or job["hostfile"]):
        read = Hostfile(list(slurm_job.nodes), PER_NODE, {})
        ranks_from = f"job {slurm_job.job_id}, in the order Slurm ranks its nodes"
    else:
        read, ranks_from = _read_nodes(job["hostlist"], job["hostfile"], job["hostfile_lines"])
    _check_on_fabric(read.nodes, view)
    gpus = _gpus_per_node(job["gpus_per_node"], slurm_job, view, read)
    ranks = read.tasks or [node for node in read.nodes for _ in range(read.counts.get(node, gpus))]
    tp = job["tp"] if job["tp"] is not None else (slurm_job and slurm_job.tp) or 1
    pp = job["pp"] if job["pp"] is not None else (slurm_job and slurm_job.pp) or 1
    layout = ParallelLayout.for_world(
        len(ranks), tp, pp, job["cp"], job["ep"], job["rank_order"], job["etp"]
    )
    return PlacedJob(view, read.nodes, gpus, layout, ranks, ranks_from)


def _read_nodes(hostlist: str | None, hostfile: str | None, lines: str) -> tuple[Hostfile, str]:
    if hostfile:
        try:
            text = Path(hostfile).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read hostfile {hostfile}: {err}") from None
        read = parse_hostfile(text, hostfile, lines)
        return read, read.describe(hostfile)
    if not hostlist:
        raise UsageError("give the job's nodes: --nodes HOSTLIST or --hostfile FILE")
    nodes = list(dict.fromkeys(names.expand(hostlist, "--nodes", UsageError)))
    return Hostfile(nodes, PER_NODE, {}), f"--nodes, {len(nodes)} nodes in name order"


#: How many names a "not on the fabric" error lists before it counts the rest.
_LISTED_UNKNOWN = 5


def _check_on_fabric(nodes: list[str], view: FabricView) -> None:
    """An input error naming the nodes the fabric does not place (and the placed name
    nearest the first): a typo must not be explained as a node of its own."""
    unknown = [node for node in nodes if node not in view.fmap.places]
    if not unknown:
        return
    listed = ", ".join(unknown[:_LISTED_UNKNOWN])
    more = f" and {len(unknown) - _LISTED_UNKNOWN} more" if len(unknown) > _LISTED_UNKNOWN else ""
    near = names.nearest(unknown[0], view.fmap.places)
    hint = f" (did you mean {near}?)" if near else ""
    raise InputError(
        f"{len(unknown)} of {len(nodes)} nodes are not on the fabric "
        f"({view.fmap.source or 'the topology'}): {listed}{more}{hint}"
    )


def _gpus_per_node(
    flag: int | None, slurm_job: SlurmJob | None, view: FabricView, read: Hostfile
) -> int:
    """GPUs (ranks) per node: the flag, else the hostfile's most tasks or slots on a node,
    else the job's, else the fabric's. A flag outside 1..MAX_GPUS_PER_NODE is a usage error,
    a job's or hostfile's count above it an input error (no node holds more, and a layout
    that large would take a loop over every rank to refuse); a flag below the hostfile's
    count a usage error."""
    most = max(read.counts.values(), default=0)
    if flag is not None:
        if not 1 <= flag <= MAX_GPUS_PER_NODE:
            raise UsageError(f"--gpus-per-node must be 1 to {MAX_GPUS_PER_NODE}, got {flag}")
        if most > flag:
            busiest = max(read.counts, key=lambda node: read.counts[node])
            raise UsageError(
                f"the hostfile runs {most} ranks on {busiest}, more than --gpus-per-node {flag}"
            )
        return flag
    gpus = most or (slurm_job and slurm_job.gpus_per_node) or view.gpus_per_node
    if not gpus:
        raise UsageError("--gpus-per-node is needed: neither the job nor the fabric says")
    if gpus > MAX_GPUS_PER_NODE:
        raise InputError(
            f"the job's nodes hold {gpus} GPUs each, more than any node can "
            f"({MAX_GPUS_PER_NODE}); pass --gpus-per-node"
        )
    return gpus


def slurm_job_of(settings: Settings, job_id: str) -> SlurmJob:
    """Job *job_id* as ``scontrol show job --json`` gives it; an input error while it has no
    nodes."""
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
    from topograph_slurm.analysis.placement.span import rank_nodes

    view = job.view
    ranks = rank_nodes(nodes, job.gpus) if nodes else job.ranks
    return explain(job.layout, ranks, job.gpus, view.fmap, view.facts)


def better_order(job: PlacedJob) -> tuple[list[str], Explanation]:
    """A node order that keeps each kind of group on its fastest links (nodes with health
    findings last), and how the groups sit in it."""
    from topograph_slurm.analysis.placement.order import best_order

    view = job.view
    uneven = sorted({count for count in Counter(job.ranks).values()})
    if len(uneven) > 1:
        raise InputError(
            f"order lays the same number of ranks on every node; the hostfile runs "
            f"{uneven[0]} to {uneven[-1]} per node"
        )
    unhealthy = set(view.facts.problems) if view.facts else set()
    chosen = best_order(job.layout, job.order, job.gpus, view.fmap, unhealthy)
    return chosen.nodes, explanation(job, chosen.nodes)
