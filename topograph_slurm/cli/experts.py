"""``topograph-slurm experts``: a MoE model's expert placement (DeepSeek's EPLB) on a job's
GPUs, EPLB's "node" being the fabric's fastest domain."""

from __future__ import annotations

from typing import Any

import click

from topograph_slurm.app.experts import LOAD_FORMATS
from topograph_slurm.cli.display import environment, show, warn, write
from topograph_slurm.cli.options import (
    ASCII_INT,
    JOB_ID,
    NODE_KEYS,
    command,
    job_or_environment,
    node_options,
    output_options,
    split_flags,
)
from topograph_slurm.errors import UsageError
from topograph_slurm.render.expert_files import ENGINE_FORMATS

_EXPERT_KEYS = ("loads", "loads_format", "replicas", "groups", "ep")


@command(aliases={"--out": "--output"})
@JOB_ID
@click.option(
    "--loads",
    required=True,
    metavar="FILE",
    help="Per-expert token counts, [layer][logical expert]: SGLang's expert-distribution dump "
    "as JSON ({'logical_count': ...}, one table or one per forward pass, summed), DeepSeek "
    "EPLB's weight as JSON (a list of lists, or an object with a 'weight' or 'load' key), "
    "TensorRT-LLM's expert statistics directory (meta_info.json, rank*.safetensors; ranks and "
    "iterations summed) or CSV (one row per layer).",
)
@click.option(
    "--loads-format",
    type=click.Choice(LOAD_FORMATS),
    default="auto",
    show_default=True,
    help="How to read --loads: auto (a directory is TensorRT-LLM's; JSON by its first "
    "character, the object's key names the engine), sglang, eplb, csv, trtllm.",
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
    help="Expert groups (DeepSeek-V3's group-limited routing); used when they divide the "
    "experts and divide by the domains, else the global policy (as EPLB and vLLM).",
)
@click.option(
    "--ep", type=ASCII_INT, help="Expert-parallel size: the first EP ranks (default: all)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", *ENGINE_FORMATS]),
    default="text",
    show_default=True,
    help="text (the report), json (the plan), or the file an engine loads: sglang "
    "(--init-expert-location FILE.json: physical_to_logical_map only), sglang-topology "
    "(--eplb-topology FILE.json: the EP ranks' rank_cost_matrix by the fabric level each pair "
    "shares), eplb (DeepSeek EPLB's phy2log, log2phy, logcnt), trtllm (TensorRT-LLM's "
    "moe_config.load_balancer YAML).",
)
@click.option(
    "--first-layer",
    type=ASCII_INT,
    default=0,
    show_default=True,
    help="--format trtllm: the model layer index of the loads' first row (TensorRT-LLM keys "
    "its assignments by model layer; DeepSeek-V3's first MoE layer is 3).",
)
@click.option(
    "--per-gpu",
    is_flag=True,
    help="Text: also list each GPU's experts per layer (one line per GPU; long for large jobs).",
)
@node_options
@output_options("output", "json", "templates")
@click.pass_context
def experts(
    ctx: click.Context,
    /,
    job_id: str | None,
    as_json: bool,
    fmt: str,
    first_layer: int,
    per_gpu: bool,
    output: str | None,
    **flags: Any,
) -> None:
    """Place a MoE model's experts on a job's GPUs with DeepSeek's EPLB, the fabric's
    fastest domain as EPLB's "node".

    That domain is a multi-node NVLink domain when the job's nodes sit in one (a snapshot
    with GPU fabric data, or the blocks of --topology), else one node's GPUs. With as many
    GPUs in every domain and --groups dividing the experts and dividing by the domains,
    the hierarchical policy
    packs expert groups onto domains, replicates hot experts inside each, and packs the
    replicas onto its GPUs; otherwise the global policy replicates over all GPUs at once.

    Prints per layer the busiest GPU over the mean and the share of tokens leaving the
    sender's domain (uniform routing assumed), before (experts contiguous, no replicas)
    and after (with --per-gpu also each GPU's experts); --json gives EPLB's three arrays
    per layer (physical-to-logical, logical-to-physical padded with -1, replica counts)
    and each GPU's experts; --format sglang|sglang-topology|eplb|trtllm the file that
    engine loads (docs/moe.md). -o FILE writes the JSON or the engine's file instead of
    stdout; with the text report, FILE gets the JSON plan and the text still prints.

    JOBID (default inside a job: $SLURM_JOB_ID), --nodes or --hostfile name the GPUs.

    \b
    Examples:
      topograph-slurm experts --sim nodes=4,gpus=4 --nodes 'gpu[0001-0004]' \\
          --loads loads.json --replicas 32 --groups 4
      topograph-slurm experts "$SLURM_JOB_ID" --topology /etc/slurm/topology.conf \\
          --loads eplb.csv --replicas 288 --groups 8 -o plan.json
      topograph-slurm experts "$SLURM_JOB_ID" --loads sglang_dump.json --replicas 288 \\
          --groups 8 --format sglang -o init_expert_location.json
    """
    from topograph_slurm.app import experts as app
    from topograph_slurm.render.expert_files import render_engine_file
    from topograph_slurm.render.experts import experts_data, render_experts

    if as_json and fmt != "text":
        raise UsageError(f"--json or --format {fmt}, not both")
    fmt = "json" if as_json else fmt
    env = environment(ctx)  # a bad --templates directory fails before any work
    flags.pop("templates")
    wanted = {key: flags.pop(key) for key in _EXPERT_KEYS} | {
        "rank_costs": fmt == "sglang-topology"
    }
    settings, topology, job = split_flags(ctx, flags, NODE_KEYS)
    job_id = job_or_environment(job_id, job["hostlist"], job["hostfile"])
    run = app.plan(settings, topology, job_id, job, wanted, warn)
    made = (run.plan, run.gpus, run.domain_kind, run.loads_from, run.ranks_from)
    plan = experts_data(*made) if fmt != "text" or output else {}
    if fmt in ENGINE_FORMATS:
        result = render_engine_file(env, plan, fmt, first_layer, run.rank_costs)
    else:
        result = render_experts(env, plan, "json") if plan else ""
    if fmt == "text":  # the report on stdout; -o FILE gets the JSON plan beside it
        report = render_experts(env, experts_data(*made, "text", per_gpu_text=per_gpu), "text")
        if output:
            write(ctx, output, result)
        show(report)
    else:
        write(ctx, output or "-", result)
