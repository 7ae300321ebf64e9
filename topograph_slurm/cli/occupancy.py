"""``topograph-slurm occupancy``: how full each NVLink domain, block or leaf is, which jobs
are spread over more of them than they need, and which free GPUs no pending job can use."""

from __future__ import annotations

from typing import Any

import click

from topograph_slurm.app import occupancy
from topograph_slurm.cli.display import environment, log, show, warn, write
from topograph_slurm.cli.options import (
    APPLY,
    ASCII_INT,
    SLURM_HEADING,
    TOPOLOGY,
    command,
    fabric_options,
    grouped,
    output_options,
    split_flags,
)
from topograph_slurm.errors import Exit


@command("occupancy")
@click.option(
    "--keep-whole",
    is_flag=True,
    help="Also print the scontrol update lines that keep whole free units whole: Weight "
    "raised (and the topo_keep feature) on every node of a unit no job holds any of, so "
    "Slurm fills partly used units first (a dry run: exit 1 when lines are pending).",
)
@click.option(
    "--reset",
    is_flag=True,
    help="Instead, the lines that take every keep offset and feature off again.",
)
@click.option(
    "--keep-weight",
    "occupancy_keep_weight",
    type=ASCII_INT,
    metavar="N",
    help="Added to the Weight of a whole free unit's nodes (default 100; below health's "
    "--degraded-weight, so a degraded node stays last).",
)
@grouped(SLURM_HEADING, [APPLY])
@TOPOLOGY
@fabric_options
@output_options("json", "metrics", "templates")
@click.pass_context
def occupancy_command(
    ctx: click.Context,
    /,
    metrics_file: str | None,
    as_json: bool,
    keep_whole: bool,
    reset: bool,
    apply: bool,
    **flags: Any,
) -> None:
    """Show GPUs busy, free and down per unit at the TP home level (NVLink domain or block,
    else leaf), overall and per partition, from `scontrol show nodes --json` and `scontrol
    show jobs --json`.

    Also: running jobs on more units than the fewest that could hold them; stranded GPUs
    (free GPUs in units where no pending job's TP group or segment fits); the largest TP
    group placeable now. The units come from --topology FILE, a fabric source, else the
    topology slurmctld runs. Exit 0 whatever it finds (a
    timer runs it), non-zero only on an error: a topology file or fabric source that places
    none of Slurm's nodes is one (exit 3), so are node names outside Slurm's name rule.

    --keep-whole also prints the scontrol update lines of the Weight offsets that keep whole
    units free (docs/occupancy.md; exit 1 while lines are pending); --apply runs them (exit
    0, 10 when Slurm refused one); --reset: the lines that take them off.

    \b
    Examples:
      topograph-slurm occupancy
      topograph-slurm occupancy --topology /etc/slurm/topology.conf --json
      topograph-slurm occupancy --metrics /var/lib/node_exporter/topograph_occupancy.prom
      topograph-slurm occupancy --apply
    """
    from topograph_slurm.render.health import render_commands
    from topograph_slurm.render.occupancy import render_occupancy, render_occupancy_metrics

    flags.pop("templates")
    env = environment(ctx)  # a bad --templates directory fails before any work
    settings, topology, _ = split_flags(ctx, flags, ())
    found = occupancy.read_occupancy(settings, topology, warn)
    keep: dict[str, Any] | None = None
    commands: list[str] = []
    if keep_whole or reset or apply:
        plan = occupancy.keep_plan(settings, topology, warn, reset=reset)
        commands = render_commands(env, plan)
        keep = {"reset": reset, "weight": settings.occupancy_keep_weight, "commands": commands}
    text = render_occupancy(env, found, "json" if as_json else "text", keep)  # before any write
    if metrics_file:
        write(ctx, metrics_file, render_occupancy_metrics(env, found))
    show(text)
    if not commands:
        ctx.exit(Exit.OK)
    if not apply:
        ctx.exit(Exit.DIFFERS)
    occupancy.apply_keep(settings, commands, lambda line: log(ctx, f"applied: {line}"))
    log(ctx, f"occupancy: {len(commands)} command(s) applied")
    ctx.exit(Exit.OK)
