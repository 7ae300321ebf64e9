"""``topograph-slurm explain`` and ``order``: a job's parallel groups against the fabric, and a
node order that keeps each kind of group on its fastest links."""

from __future__ import annotations

from typing import Any

import click

from topograph_slurm.app import placement
from topograph_slurm.app.binding import job_binding
from topograph_slurm.app.placement import PlacedJob
from topograph_slurm.cli.display import environment, show, warn, write
from topograph_slurm.cli.options import (
    JOB_ID,
    TOPO_MATRIX,
    command,
    job_options,
    job_or_environment,
    output_options,
    split_flags,
)
from topograph_slurm.errors import Exit, UsageError
from topograph_slurm.render.placement import ORDER_FORMATS


def prepare_job(ctx: click.Context, job_id: str | None, flags: dict[str, Any]) -> PlacedJob:
    """The job flags and the fabric flags' settings placed (:func:`.app.placement.prepare_job`)."""
    settings, topology, job = split_flags(ctx, flags)
    return placement.prepare_job(settings, topology, job_id, job, warn)


@command(aliases={})
@JOB_ID
@click.option(
    "--pools",
    "pools_file",
    metavar="FILE",
    help="Check a running prefill/decode deployment instead (pools --json's output, or a "
    "hand-written file): each instance's TP span, each KV pair's path level and slowest link, "
    "the link quality of each pool; exit 1 when something is not met, a decode instance on a "
    "degraded path included.",
)
@job_options
@output_options("json", "templates")
@click.pass_context
def explain(
    ctx: click.Context, /, job_id: str | None, as_json: bool, pools_file: str | None, **flags: Any
) -> None:
    """Where a job's TP, CP, DP, PP and (with --ep) EP, expert-DP and expert-TP groups sit on
    the fabric, as Megatron-Core's rank generator forms them.

    JOBID (a running job; default inside a job: $SLURM_JOB_ID) gives the nodes in the order
    Slurm ranks them, GPUs per node, the TP size the --tp-size filter recorded, and (without
    --topology or a fabric source) the topology slurmctld runs; --nodes/--hostfile with
    --gpus-per-node describe any job.

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

    flags.pop("templates")
    if pools_file:
        _explain_pools(ctx, job_id, pools_file, as_json, flags)
    job_id = job_or_environment(job_id, flags["hostlist"], flags["hostfile"])
    job = prepare_job(ctx, job_id, flags)
    result = placement.explanation(job)
    fmt = "json" if as_json else "text"
    show(render_explanation(environment(ctx), result, fmt, job.ranks_from))
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
    show(render_pools(environment(ctx), plan, "json" if as_json else "text"))
    ctx.exit(Exit.OK if plan.met else Exit.DIFFERS)


@command()
@JOB_ID
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
@TOPO_MATRIX
@job_options
@output_options("output", "json", "templates")
@click.pass_context
def order(
    ctx: click.Context,
    /,
    job_id: str | None,
    fmt: str,
    topo_matrix: str | None,
    output: str | None,
    as_json: bool,
    **flags: Any,
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
          --gpus-per-node 8 --tp 16 --format slurm-hostfile -o hosts
      SLURM_HOSTFILE=hosts srun --distribution=arbitrary -n "$SLURM_NTASKS" ...
      topograph-slurm order --topology topology.conf --nodes "$SLURM_JOB_NODELIST" \\
          --gpus-per-node 8 --topo-matrix topo.txt --format binding-srun
    """
    from topograph_slurm.render.placement import (
        BINDING_FORMATS,
        render_order,
        render_order_json,
    )

    flags.pop("templates")
    if topo_matrix and fmt not in BINDING_FORMATS:
        raise UsageError(f"--topo-matrix is for the binding-* formats, not --format {fmt}")
    job_id = job_or_environment(job_id, flags["hostlist"], flags["hostfile"])
    job = prepare_job(ctx, job_id, flags)
    nodes, result = placement.better_order(job)
    bound = job_binding(job, topo_matrix) if fmt in BINDING_FORMATS else ()
    if as_json:
        text = render_order_json(nodes, job.gpus, result, bound)
    else:
        text = render_order(environment(ctx), fmt, nodes, job.gpus, bound)
    if not result.tp_inside:
        warn(f"this allocation cannot keep TP inside: {result.verdict}; printed the best order")
    code = write(ctx, output or "-", text)
    ctx.exit(code if code else (Exit.OK if result.tp_inside else Exit.DIFFERS))
