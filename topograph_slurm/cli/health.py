"""``topograph-slurm health``: fabric → findings → per-node verdicts → the ``scontrol update``
commands that put them into Slurm (printed; run with ``--apply``) → exit code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from topograph_slurm.app import health as use_case
from topograph_slurm.cli.display import environment, log, show, warn, write
from topograph_slurm.cli.options import (
    APPLY,
    ASCII_INT,
    BENCH,
    FABRIC_HEADING,
    FEATURE_PREFIX,
    HOOK_HEADING,
    RECORD_DIR,
    SLURM_HEADING,
    SLURM_VERSION,
    command,
    fabric_options,
    flag_settings,
    grouped,
    output_options,
)
from topograph_slurm.errors import Exit


@command()
@click.option(
    "--degraded-weight",
    "health_weight",
    type=ASCII_INT,
    metavar="N",
    help="Added to a degraded node's Weight, so Slurm allocates it last (default 1000).",
)
@click.option(
    "--drain/--no-drain",
    "health_drain",
    default=None,
    help="Drain drain-worthy nodes with a 'topograph:' reason (default), or only weight "
    "and label them.",
)
@click.option(
    "--job-records",
    is_flag=True,
    help="Also judge the links the job records' Epilog parts (record node-end) found "
    "degraded or taking errors during a job: degraded, never drained.",
)
@click.option(
    "--job-records-since",
    metavar="DURATION",
    help="With --job-records: parts written within this long (default 24h; 36h, 7d, 90m).",
)
@output_options("json", "metrics", "templates")
@grouped(SLURM_HEADING, [APPLY, FEATURE_PREFIX, SLURM_VERSION])
@fabric_options
@grouped(FABRIC_HEADING, [BENCH])
@grouped(HOOK_HEADING, [RECORD_DIR])
@click.pass_context
def health(
    ctx: click.Context,
    /,
    as_json: bool,
    metrics_file: str | None,
    apply: bool,
    job_records: bool,
    bench: str | None,
    rewrites: Sequence[str],
    **flags: Any,
) -> None:
    """Turn fabric findings into per-node verdicts, Weights, features and drains in Slurm.

    Each node is healthy, degraded (Weight raised: allocated last) or drain-worthy (drained
    with a 'topograph: <kinds>' reason). Every node gets features: its health class
    (topo_ok, topo_degraded, topo_drain), leaf (topo_leaf_<leaf>) and block
    (topo_block_<block>), so jobs can ask for --constraint=topo_ok. Dry run by default: prints
    the scontrol update commands; --apply runs them, only where Slurm's value differs, and
    undoes them when the node is healthy again. On a host without scontrol, a dry run with
    --slurm-nodes HOSTLIST still proposes: Slurm's current values are unknown (shown as ?),
    so the commands start from its defaults (Weight 1, no features, not drained). Exit 0
    when Slurm holds every verdict (or --apply set them), 1 when a dry run has commands
    pending, 4 when Slurm cannot be asked, 10 when Slurm refused a command (the others still
    run).

    \b
    Examples:
      topograph-slurm health --ibnetdiscover fabric.txt
      topograph-slurm health --snapshot /var/lib/topograph/snap --json
      topograph-slurm health --ufm https://ufm --ufm-credentials ufm.cred --apply
    """
    from topograph_slurm.render.health import render_commands, render_health_metrics, render_plan

    flags.pop("templates")
    env = environment(ctx)  # a bad --templates directory fails before any work
    settings = flag_settings(ctx, rewrites, **flags)
    found = use_case.health_plan(settings, warn, bench, dry_run=not apply, job_records=job_records)
    commands = render_commands(env, found)
    text = render_plan(env, found, commands, "json" if as_json else "text")  # before any write
    if metrics_file:
        write(ctx, metrics_file, render_health_metrics(env, found, commands))
    show(text)
    if not apply:
        ctx.exit(Exit.DIFFERS if commands else Exit.OK)
    use_case.apply(settings, commands, done=lambda line: log(ctx, f"applied: {line}"))
    log(ctx, f"health: {len(commands)} command(s) applied")
    ctx.exit(Exit.OK)
