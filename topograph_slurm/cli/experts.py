"""``topograph-slurm experts``: a MoE model's expert placement (DeepSeek's EPLB) on a job's
GPUs, EPLB's "node" being the fabric's fastest domain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from topograph_slurm.cli.options import ASCII_INT, warn
from topograph_slurm.cli.placement import NODE_KEYS, node_options, split_flags

_EXPERT_KEYS = ("loads", "replicas", "groups", "ep")


@click.command()
@click.argument("job_id", metavar="[JOBID]", required=False)
@click.option(
    "--loads",
    required=True,
    metavar="FILE",
    help="Per-expert token counts, [layer][logical expert]: JSON (a list of lists, or an "
    "object with a 'weight' or 'load' key) or CSV (one row per layer).",
)
@click.option(
    "--replicas",
    type=ASCII_INT,
    required=True,
    help="Physical expert slots in all (logical experts + redundant ones), a multiple of --ep.",
)
@click.option(
    "--groups",
    type=ASCII_INT,
    default=1,
    show_default=True,
    help="Expert groups (DeepSeek-V3's group-limited routing); must divide the experts.",
)
@click.option(
    "--ep", type=ASCII_INT, help="Expert-parallel size: the first EP ranks (default: all)."
)
@node_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@click.option(
    "--per-gpu",
    is_flag=True,
    help="Text: also list each GPU's experts per layer (one line per GPU; long for large jobs).",
)
@click.option(
    "--out",
    metavar="FILE",
    help="Also write the JSON plan to FILE (atomically; nothing is written on an error).",
)
@click.pass_context
def experts(
    ctx: click.Context,
    /,
    job_id: str | None,
    as_json: bool,
    per_gpu: bool,
    out: str | None,
    **flags: Any,
) -> None:
    """Place a MoE model's experts on a job's GPUs with DeepSeek's EPLB, the fabric's
    fastest domain as EPLB's "node".

    That domain is a multi-node NVLink domain when the job's nodes sit in one (a snapshot
    with GPU fabric data, or the blocks of --topology), else one node's GPUs. With as many
    GPUs in every domain and --groups dividing by the domains, the hierarchical policy
    packs expert groups onto domains, replicates hot experts inside each, and packs the
    replicas onto its GPUs; otherwise the global policy replicates over all GPUs at once.

    Prints per layer the busiest GPU over the mean and the share of tokens leaving the
    sender's domain (uniform routing assumed), before (experts contiguous, no replicas)
    and after (with --per-gpu also each GPU's experts); --json gives EPLB's three arrays
    per layer (physical-to-logical, logical-to-physical padded with -1, replica counts)
    and each GPU's experts.

    \b
    Examples:
      topograph-slurm experts --sim nodes=4,gpus=4 --nodes 'gpu[0001-0004]' \\
          --loads loads.json --replicas 32 --groups 4
      topograph-slurm experts "$SLURM_JOB_ID" --topology /etc/slurm/topology.conf \\
          --loads eplb.csv --replicas 288 --groups 8 --out plan.json
    """
    from topograph_slurm.app import experts as app
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.experts import experts_data, render_experts

    wanted = {key: flags.pop(key) for key in _EXPERT_KEYS}
    settings, topology, job = split_flags(ctx, flags, NODE_KEYS)
    run = app.plan(settings, topology, job_id, job, wanted, warn)
    made = (run.plan, run.gpus, run.domain_kind, run.loads_from, run.ranks_from)
    env = environment(None)
    plan_json = render_experts(env, experts_data(*made), "json") if out or as_json else ""
    if out:
        from topograph_slurm.output import write_file

        write_file(Path(out), plan_json)
    if as_json:
        click.echo(plan_json, nl=False)
    else:
        text = experts_data(*made, "text", per_gpu_text=per_gpu)
        click.echo(render_experts(env, text, "text"), nl=False)
