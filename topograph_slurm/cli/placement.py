"""``topograph-slurm explain`` and ``order``: a job's parallel groups against the fabric, and a
node order that keeps each kind of group on its fastest links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from topograph_slurm.app import placement
from topograph_slurm.app.binding import job_binding
from topograph_slurm.app.placement import PlacedJob
from topograph_slurm.cli.options import ASCII_INT, fabric_options, flag_settings, warn
from topograph_slurm.config import Settings
from topograph_slurm.errors import Exit, UsageError
from topograph_slurm.model.placement import MEGATRON_ORDER
from topograph_slurm.render.environment import environment
from topograph_slurm.render.placement import ORDER_FORMATS
from topograph_slurm.sources.hostfile import LINE_KINDS

F = TypeVar("F", bound=Callable[..., Any])

#: Where a job's ranks run (``explain``, ``order``, ``experts``).
NODE_OPTIONS = [
    click.option("--nodes", "hostlist", metavar="HOSTLIST", help="The job's nodes."),
    click.option(
        "--hostfile",
        metavar="FILE",
        help="Where the ranks run: a SLURM_HOSTFILE (one line per task: rank r on line r's "
        "node) or a node list (one node per line, ranks laid GPUs-per-node at a time: plain, "
        "torchrun, MPI with slots=N, `order` output); default: the --nodes list in name order.",
    ),
    click.option(
        "--hostfile-lines",
        type=click.Choice(LINE_KINDS),
        default="auto",
        show_default=True,
        help="How --hostfile's lines are read: task, node, or auto (a file repeating a node "
        "without slots= is one line per task); explain says which it read.",
    ),
    click.option(
        "--gpus-per-node",
        type=ASCII_INT,
        metavar="N",
        help="GPUs (ranks) per node; default: measured in the snapshot, or the simulation's.",
    ),
]
TOPOLOGY_OPTION = click.option(
    "--topology",
    metavar="FILE",
    help="The topology.conf or topology.yaml Slurm runs (places only; a fabric source "
    "adds link rates and health).",
)
_JOB_OPTIONS = [
    *NODE_OPTIONS,
    click.option(
        "--tp",
        type=ASCII_INT,
        help="Tensor-parallel size (default: the job's --tp-size record, else 1).",
    ),
    click.option(
        "--pp",
        type=ASCII_INT,
        help="Pipeline-parallel size (default: the job's --pp-size record, else 1).",
    ),
    click.option(
        "--cp", type=ASCII_INT, default=1, show_default=True, help="Context-parallel size."
    ),
    click.option(
        "--ep",
        type=ASCII_INT,
        default=1,
        show_default=True,
        help="Expert-parallel size: EP groups come from Megatron-Core's expert grid "
        "(expert TP x EP x expert DP x PP), not from the dense one.",
    ),
    click.option(
        "--etp",
        type=ASCII_INT,
        help="Expert tensor-parallel size (Megatron-Core's --expert-tensor-parallel-size; "
        "default: --tp).",
    ),
    click.option(
        "--order",
        "rank_order",
        default=MEGATRON_ORDER,
        show_default=True,
        help="The launcher's rank order, fastest-varying kind first (Megatron-Core's "
        "--rank-order string); kinds left out are appended with size 1. DP is what tp x cp x "
        "pp leave, expert DP what expert TP x EP x pp leave.",
    ),
    TOPOLOGY_OPTION,
]


def job_options(func: F) -> F:
    for option in reversed(_JOB_OPTIONS):
        func = option(func)
    return fabric_options(func)


def node_options(func: F) -> F:
    """Where the ranks run, the topology file and the fabric: a command without a training
    layout (``experts``, ``pools``)."""
    for option in reversed([*NODE_OPTIONS, TOPOLOGY_OPTION]):
        func = option(func)
    return fabric_options(func)


NODE_KEYS = ("hostlist", "hostfile", "hostfile_lines", "gpus_per_node")
_JOB_KEYS = (
    *NODE_KEYS,
    "tp",
    "pp",
    "cp",
    "ep",
    "etp",
    "rank_order",
)


def split_flags(
    ctx: click.Context, flags: dict[str, Any], keys: tuple[str, ...] = _JOB_KEYS
) -> tuple[Settings, str | None, dict[str, Any]]:
    """The settings the fabric flags make, the --topology file, and the job flags (*keys*)."""
    job = {key: flags.pop(key) for key in keys}
    topology = flags.pop("topology")
    rewrites = flags.pop("rewrites")
    settings = flag_settings(ctx, rewrites, **flags)
    return settings, topology, job


def prepare_job(ctx: click.Context, job_id: str | None, flags: dict[str, Any]) -> PlacedJob:
    """The job flags and the fabric flags' settings placed (:func:`.app.placement.prepare_job`)."""
    settings, topology, job = split_flags(ctx, flags)
    return placement.prepare_job(settings, topology, job_id, job, warn)


@click.command()
@click.argument("job_id", metavar="[JOBID]", required=False)
@job_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@click.option(
    "--pools",
    "pools_file",
    metavar="FILE",
    help="Check a running prefill/decode deployment instead (pools --json's output, or a "
    "hand-written file): each instance's TP span, each KV pair's path level and slowest link, "
    "the link quality of each pool; exit 1 when something is not met, a decode instance on a "
    "degraded path included.",
)
@click.pass_context
def explain(
    ctx: click.Context, /, job_id: str | None, as_json: bool, pools_file: str | None, **flags: Any
) -> None:
    """Where a job's TP, CP, DP, PP and (with --ep) EP, expert-DP and expert-TP groups sit on
    the fabric, as Megatron-Core's rank generator forms them.

    JOBID (a running job) gives the nodes in the order Slurm ranks them, GPUs per node, the TP
    size the --tp-size filter recorded, and (without --topology or a fabric source) the
    topology slurmctld runs; --nodes/--hostfile with --gpus-per-node describe any job.

    Per kind of group: how many groups cross each fabric level (node, NVLink domain/block,
    each BlockSizes level of aggregated blocks, leaf, spine levels, island), the slowest link
    on the worst group's path, and anything unhealthy on it. Exit 0 when every TP group is
    inside the fastest domain that can hold it, 1 when some cross (for a job prolog, a
    launcher check or CI); 3 when a node is not on the fabric.

    \b
    Examples:
      topograph-slurm explain "$SLURM_JOB_ID" --pp 4
      topograph-slurm explain --sim demo --nodes 'gpu[0001-0004]' --tp 16
      topograph-slurm explain --topology /etc/slurm/topology.conf --nodes "$SLURM_JOB_NODELIST" \\
          --gpus-per-node 8 --tp 8 --pp 4
    """
    from topograph_slurm.render.placement import render_explanation

    if pools_file:
        _explain_pools(ctx, job_id, pools_file, as_json, flags)
    job = prepare_job(ctx, job_id, flags)
    result = placement.explanation(job)
    fmt = "json" if as_json else "text"
    click.echo(render_explanation(environment(None), result, fmt, job.ranks_from), nl=False)
    ctx.exit(Exit.OK if result.tp_inside else Exit.DIFFERS)


def _explain_pools(
    ctx: click.Context, job_id: str | None, path: str, as_json: bool, flags: dict[str, Any]
) -> None:
    from topograph_slurm.app.pools import check_file
    from topograph_slurm.render.pools import render_pools

    if job_id:
        raise UsageError("explain --pools FILE reads the nodes from FILE: drop JOBID")
    settings, topology, job = split_flags(ctx, flags)
    plan = check_file(settings, topology, path, job, warn)
    click.echo(render_pools(environment(None), plan, "json" if as_json else "text"), nl=False)
    ctx.exit(Exit.OK if plan.met else Exit.DIFFERS)


@click.command()
@job_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(ORDER_FORMATS)),
    default="plain",
    show_default=True,
    help="plain (a node per line), slurm-hostfile (a line per task, for SLURM_HOSTFILE with "
    "srun --distribution=arbitrary inside an allocation), torchrun (host and --node-rank), mpi "
    "(host slots=N); per local rank (one task per GPU) from nvidia-smi topo -m: binding-env "
    "(its GPU, nearest NIC(s) as NCCL_IB_HCA/UCX_NET_DEVICES, CPU list), binding-wrapper (a sh "
    "script exporting them for LOCAL_RANK or SLURM_LOCALID, then running its arguments), "
    "binding-srun (srun's --cpu-bind=mask_cpu: and --gpu-bind=map_gpu:).",
)
@click.option(
    "--topo-matrix",
    metavar="FILE",
    help="binding-*: one node's nvidia-smi topo -m (or AMD rocm-smi --showtopo) capture, "
    "shared by every node (default: "
    "each node's own from --snapshot).",
)
@click.argument("job_id", metavar="[JOBID]", required=False)
@click.pass_context
def order(
    ctx: click.Context, /, job_id: str | None, fmt: str, topo_matrix: str | None, **flags: Any
) -> None:
    """A node order that keeps each TP group inside one node or NVLink domain, each pipeline
    inside one leaf or block where it fits, and DP outermost; nodes with health findings last.

    The order chosen is never worse than the order given (--nodes, or --hostfile's nodes in
    first-appearance order) and the nodes in name order, compared kind by kind in the
    documented priority (TP, expert TP, CP, EP, PP, DP, expert DP; for each, groups crossing
    the coarsest level first): it may cross more groups of a later kind to keep an earlier
    one inside. Exit 1 when even the best order leaves TP groups crossing their fastest domain (it
    is printed anyway), with the reason on stderr.

    The binding-* formats print, for GPUs-per-node local ranks, each rank's GPU, the NIC(s)
    on its best topo -m path class and its GPU's CPU affinity; every node must bind alike and
    have a topo -m (--topo-matrix or the snapshot's), else exit 3.

    \b
    Examples:
      topograph-slurm order --sim demo --nodes 'gpu[0001-0008]' --tp 16 --pp 2
      topograph-slurm order --topology topology.conf --nodes "$SLURM_JOB_NODELIST" \\
          --gpus-per-node 8 --tp 16 --format slurm-hostfile > hosts
      SLURM_HOSTFILE=hosts srun --distribution=arbitrary -n "$SLURM_NTASKS" ...
      topograph-slurm order --topology topology.conf --nodes "$SLURM_JOB_NODELIST" \\
          --gpus-per-node 8 --topo-matrix topo.txt --format binding-srun
    """
    from topograph_slurm.render.placement import BINDING_FORMATS, render_order

    if topo_matrix and fmt not in BINDING_FORMATS:
        raise UsageError(f"--topo-matrix is for the binding-* formats, not --format {fmt}")
    job = prepare_job(ctx, job_id, flags)
    nodes, result = placement.better_order(job)
    bound = job_binding(job, topo_matrix) if fmt in BINDING_FORMATS else ()
    click.echo(render_order(environment(None), fmt, nodes, job.gpus, bound), nl=False)
    if not result.tp_inside:
        warn(f"this allocation cannot keep TP inside: {result.verdict}; printed the best order")
    ctx.exit(Exit.OK if result.tp_inside else Exit.DIFFERS)
