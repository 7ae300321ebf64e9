"""``topograph-slurm pools``: a job's nodes split into prefill and decode instances for
disaggregated serving, matched to the fabric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from topograph_slurm.app import pools
from topograph_slurm.app.binding import instance_bindings
from topograph_slurm.cli.options import log, warn
from topograph_slurm.cli.placement import NODE_KEYS, node_options, split_flags
from topograph_slurm.errors import Exit, UsageError
from topograph_slurm.render.environment import environment
from topograph_slurm.render.placement import BINDING_FORMATS


@click.command()
@click.argument("job_id", metavar="[JOBID]", required=False)
@click.option(
    "--prefill",
    required=True,
    metavar="NxTP",
    help="Prefill instances: N instances of TP GPUs each (4x8), or TP alone with --ratio.",
)
@click.option(
    "--decode",
    required=True,
    metavar="NxTP",
    help="Decode instances: N instances of TP GPUs each (2x16), or TP alone with --ratio.",
)
@click.option(
    "--ratio",
    metavar="P:D",
    help="Prefill:decode instances instead of counts: as many multiples as the nodes hold.",
)
@click.option(
    "--partition",
    metavar="NAME",
    help="Split a partition's nodes (scontrol show partition), in name order, instead of a job's.",
)
@click.option(
    "--bench",
    metavar="FILE",
    help="A bench record (bench.json, or a snapshot holding one): its slow nodes and links "
    "count as problems (default: the snapshot's own record).",
)
@click.option(
    "--out",
    metavar="DIR",
    help="Write DIR: per instance NAME.hostfile (a line per task, for SLURM_HOSTFILE with srun "
    "--distribution=arbitrary) and NAME.nodes (a node per line), hetjob.sh (one heterogeneous "
    "sbatch, a component per set of nodes, instances sharing a node in one: bash DIR/hetjob.sh "
    "SCRIPT) and pools.json (for explain --pools). DIR is replaced as a whole; it must be new, "
    "empty or written by pools.",
)
@click.option(
    "--apply",
    is_flag=True,
    help="Give every node of a pool the feature of its role (topo_pool_prefill, "
    "topo_pool_decode) in Slurm, and take it from nodes that left the pools; only where "
    "Slurm's features differ, every other feature kept.",
)
@click.option(
    "--feature-prefix",
    "health_feature_prefix",
    metavar="PREFIX",
    help="Prefix of the pool features, as health's (default topo_).",
)
@click.option(
    "--templates",
    metavar="DIR",
    help="Directory whose templates override the built-in ones (pools.*.j2, order.*.j2; "
    "config: templates).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", *sorted(BINDING_FORMATS)]),
    default="text",
    show_default=True,
    help="text (the plan), or per instance and local rank, from nvidia-smi topo -m, as order's "
    "binding-* formats: binding-env (its GPU among the instance's own, nearest NIC(s) as "
    "NCCL_IB_HCA/UCX_NET_DEVICES, CPU list), binding-srun (srun's --cpu-bind=mask_cpu: and "
    "--gpu-bind=map_gpu: for the instance's step), binding-wrapper (one sh script for every "
    "instance: sh SCRIPT INSTANCE COMMAND exports them for LOCAL_RANK or SLURM_LOCALID).",
)
@click.option(
    "--topo-matrix",
    metavar="FILE",
    help="binding-*: one node's nvidia-smi topo -m (or AMD rocm-smi --showtopo) capture, "
    "shared by every node (default: "
    "each node's own from --snapshot).",
)
@node_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@click.pass_context
def pools_command(
    ctx: click.Context,
    /,
    job_id: str | None,
    prefill: str,
    decode: str,
    ratio: str | None,
    partition: str | None,
    bench: str | None,
    out: str | None,
    apply: bool,
    fmt: str,
    topo_matrix: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Split a job's nodes into prefill and decode instances that match the fabric.

    An instance of TP up to a node's GPUs on that many GPUs of one node (GPUs-per-node / TP
    instances of one role share a node; prefill and decode never do), a larger one on whole
    nodes inside one NVLink domain/block, else one leaf; decode instances (tail-latency bound)
    on the nodes with the best links (no degraded link, missing or misaligned rail, unhealthy
    NVLink or slow benchmark); each prefill instance paired with the decode instance whose
    KV-cache path is finest (one leaf or block where it can, else one spine), each decode
    taking floor or ceil of prefills / decodes.

    The binding-* formats print each instance's local ranks on its own GPUs, as order's do;
    every node of an instance must bind alike and have a topo -m (--topo-matrix or the
    snapshot's), else exit 3.

    JOBID, --nodes, --hostfile (as for explain) or --partition name the nodes. Exit 0 when
    everything is met, 1 when something is not (said per instance), 2 when the deployment
    cannot fit at all (the error line names the closest one that does).

    \b
    Examples:
      topograph-slurm pools --sim demo --nodes 'gpu[0001-0016]' --prefill 4x8 --decode 2x16
      topograph-slurm pools "$SLURM_JOB_ID" --snapshot snap/ --prefill 8 --decode 16 --ratio 2:1
      topograph-slurm pools "$SLURM_JOB_ID" --prefill 4x4 --decode 2x8 --topo-matrix topo.txt \\
          --format binding-wrapper > bind.sh
    """
    from topograph_slurm.render.pools import render_binding, render_pools

    if as_json and fmt != "text":
        raise UsageError(f"--json or --format {fmt}, not both")
    if topo_matrix and fmt == "text":
        raise UsageError("--topo-matrix is for the binding-* formats (--format binding-env ...)")
    settings, topology, job = split_flags(ctx, flags, NODE_KEYS)
    env = environment(Path(settings.templates) if settings.templates else None)  # before work
    placed = pools.prepare(settings, topology, job_id, job, bench, warn, partition)
    plan = pools.plan_pools(placed, pools.PoolRequest(prefill, decode, ratio))
    if fmt == "text":
        text = render_pools(env, plan, "json" if as_json else "text")
    else:  # bound before anything is written: a node without topo -m writes nothing
        text = render_binding(env, plan, fmt, instance_bindings(placed, plan, topo_matrix))
    if out:
        pools.write_out(env, plan, out, settings)
    click.echo(text, nl=False)
    if apply:
        done = pools.apply_features(settings, env, plan, lambda line: log(ctx, f"applied: {line}"))
        log(ctx, f"pools: {len(done)} command(s) applied")
    ctx.exit(Exit.OK if plan.met else Exit.DIFFERS)
