"""``topograph-slurm health``: fabric → findings → per-node verdicts → the ``scontrol update``
commands that put them into Slurm (printed; run with ``--apply``) → exit code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from topograph_slurm.app import health as use_case
from topograph_slurm.cli.display import log, warn
from topograph_slurm.cli.options import ASCII_INT, RECORD_DIR, fabric_options, flag_settings
from topograph_slurm.errors import Exit
from topograph_slurm.render.environment import environment


@click.command()
@fabric_options
@click.option(
    "--slurm-version",
    metavar="X.Y|auto",
    help="Target Slurm release, or auto (default): `scontrol --version`, else `sinfo "
    "--version`, else 24.11; decides which blocks a node's label names.",
)
@click.option(
    "--feature-prefix",
    "health_feature_prefix",
    metavar="PREFIX",
    help="Prefix of the features health sets (default topo_); features without it are an "
    "admin's and are never changed.",
)
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
    "--bench",
    metavar="PATH",
    help="A `bench --record` record (bench.json or its snapshot directory) whose slow-node, "
    "slow-link and bench-drift findings count too (default: the --snapshot's own record).",
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
@RECORD_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
@click.option(
    "--apply",
    is_flag=True,
    help="Run the scontrol update commands (only for nodes whose values change).",
)
@click.option(
    "--templates", metavar="DIR", help="Directory whose templates override the built-in ones."
)
@click.pass_context
def health(
    ctx: click.Context,
    /,
    as_json: bool,
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
    from topograph_slurm.render.health import render_commands, render_plan

    settings = flag_settings(ctx, rewrites, **flags)
    env = environment(Path(settings.templates) if settings.templates else None)
    found = use_case.health_plan(settings, warn, bench, dry_run=not apply, job_records=job_records)
    commands = render_commands(env, found)
    click.echo(render_plan(env, found, commands, "json" if as_json else "text"), nl=False)
    if not apply:
        ctx.exit(Exit.DIFFERS if commands else Exit.OK)
    use_case.apply(settings, commands, done=lambda line: log(ctx, f"applied: {line}"))
    log(ctx, f"health: {len(commands)} command(s) applied")
    ctx.exit(Exit.OK)
