"""``topograph-slurm occupancy``: how full each NVLink domain, block or leaf is, which jobs
are spread over more of them than they need, and which free GPUs no pending job can use."""

from __future__ import annotations

from typing import Any

import click

from topograph_slurm.app import occupancy
from topograph_slurm.cli.display import environment, show, warn, write
from topograph_slurm.cli.options import (
    TOPOLOGY,
    command,
    fabric_options,
    output_options,
    split_flags,
)
from topograph_slurm.errors import Exit


@command("occupancy")
@TOPOLOGY
@fabric_options
@output_options("json", "metrics", "templates")
@click.pass_context
def occupancy_command(
    ctx: click.Context, /, metrics_file: str | None, as_json: bool, **flags: Any
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

    \b
    Examples:
      topograph-slurm occupancy
      topograph-slurm occupancy --topology /etc/slurm/topology.conf --json
      topograph-slurm occupancy --metrics /var/lib/node_exporter/topograph_occupancy.prom
    """
    from topograph_slurm.render.occupancy import render_occupancy, render_occupancy_metrics

    flags.pop("templates")
    env = environment(ctx)  # a bad --templates directory fails before any work
    settings, topology, _ = split_flags(ctx, flags, ())
    found = occupancy.read_occupancy(settings, topology, warn)
    text = render_occupancy(env, found, "json" if as_json else "text")  # before any write
    if metrics_file:
        write(ctx, metrics_file, render_occupancy_metrics(env, found))
    show(text)
    ctx.exit(Exit.OK)
