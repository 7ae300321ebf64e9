"""``topograph-slurm pools``: a job's nodes split into prefill and decode instances for
disaggregated serving, matched to the fabric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from topograph_slurm.app import pools
from topograph_slurm.app.binding import engine_bindings, instance_bindings
from topograph_slurm.cli.display import environment, log, show, warn
from topograph_slurm.cli.options import (
    APPLY,
    BENCH,
    FABRIC_HEADING,
    FEATURE_PREFIX,
    JOB_ID,
    NODE_KEYS,
    SLURM_HEADING,
    TOPO_MATRIX,
    command,
    grouped,
    job_or_environment,
    node_options,
    output_options,
    split_flags,
)
from topograph_slurm.errors import Exit, UsageError
from topograph_slurm.render.placement import BINDING_FORMATS
from topograph_slurm.render.serving import SERVING_FORMATS


@command(aliases={"--out": "--out-dir"})
@JOB_ID
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
    "--format",
    "fmt",
    type=click.Choice(["text", *sorted(BINDING_FORMATS), *SERVING_FORMATS]),
    default="text",
    show_default=True,
    help="text (the plan), or per instance and local rank, from nvidia-smi topo -m, as order's "
    "binding-* formats: binding-env (its GPU among the instance's own, nearest NIC(s) as "
    "NCCL_IB_HCA/UCX_NET_DEVICES, CPU list), binding-srun (srun's --cpu-bind=mask_cpu: and "
    "--gpu-bind=map_gpu: for the instance's step), binding-wrapper (one sh script for every "
    "instance: sh SCRIPT INSTANCE COMMAND exports them for LOCAL_RANK or SLURM_LOCALID); or "
    "for a launcher: dynamo (Dynamo's KV transfer domain, each node's domain files and each "
    "instance's DYN_* variables), srt-slurm (its recipe's resources for a prefill and a decode "
    "component), sglang or vllm (one script starting every instance on its GPUs, and NICs when "
    "a topo -m is at hand, and the routers pairing them). --out DIR writes all four.",
)
@TOPO_MATRIX
@node_options
@grouped(FABRIC_HEADING, [BENCH])
@output_options("out_dir", "json", "templates")
@grouped(SLURM_HEADING, [APPLY, FEATURE_PREFIX])
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
    out_dir: str | None,
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

    JOBID (default inside a job: $SLURM_JOB_ID), --nodes, --hostfile (as for explain) or
    --partition name the nodes. Exit 0 when everything is met, 1 when something is not (said
    per instance), 2 when the deployment cannot fit at all (the error line names the closest
    one that does).

    The report ends with the scontrol update lines that give every pool node the feature of
    its role (topo_pool_prefill, topo_pool_decode) and take it from nodes that left: a dry
    run (they do not change the exit code); --apply runs them, only where Slurm's features
    differ, every other feature kept. Where Slurm cannot be asked, the dry run lists them
    from nodes without features and says so.

    \b
    Examples:
      topograph-slurm pools --sim demo --nodes 'gpu[0001-0016]' --prefill 4x8 --decode 2x16
      topograph-slurm pools "$SLURM_JOB_ID" --snapshot snap/ --prefill 8 --decode 16 --ratio 2:1
      topograph-slurm pools "$SLURM_JOB_ID" --prefill 4x4 --decode 2x8 --topo-matrix topo.txt \\
          --format binding-wrapper > bind.sh
    """
    from topograph_slurm.render.pools import render_binding, render_pools
    from topograph_slurm.render.serving import render_serving, serving_context

    if as_json and fmt != "text":
        raise UsageError(f"--json or --format {fmt}, not both")
    if topo_matrix and fmt == "text" and not out_dir:
        raise UsageError(
            "--topo-matrix is for the binding-* and launcher formats (--format binding-env ...) "
            "and --out-dir's launcher files"
        )
    flags.pop("templates")
    env = environment(ctx)  # a bad --templates directory fails before any work
    settings, topology, job = split_flags(ctx, flags, NODE_KEYS)
    job_id = job_or_environment(job_id, job["hostlist"], job["hostfile"], partition)
    placed = pools.prepare(settings, topology, job_id, job, bench, warn, partition)
    plan = pools.plan_pools(placed, pools.PoolRequest(prefill, decode, ratio))
    serving = None
    if fmt in SERVING_FORMATS or out_dir:  # --out-dir writes the launchers' files too
        bound = engine_bindings(placed, plan, topo_matrix)
        root = str(Path(out_dir).resolve()) if out_dir else "."
        serving = serving_context(plan, placed.view.fmap, bound, root)
    features = pools.feature_lines(settings, env, plan, apply) if fmt == "text" or apply else None
    if fmt == "text":
        text = render_pools(env, plan, "json" if as_json else "text", features)
    elif serving is not None and fmt in SERVING_FORMATS:
        text = render_serving(env, serving, fmt)
    else:  # bound before anything is written: a node without topo -m writes nothing
        text = render_binding(env, plan, fmt, instance_bindings(placed, plan, topo_matrix))
    if out_dir:
        pools.write_out(env, plan, out_dir, settings, serving)
    show(text)
    if apply and features is not None:
        pools.apply_features(settings, features, lambda line: log(ctx, f"applied: {line}"))
        log(ctx, f"pools: {len(features.commands)} command(s) applied")
    ctx.exit(Exit.OK if plan.met else Exit.DIFFERS)
