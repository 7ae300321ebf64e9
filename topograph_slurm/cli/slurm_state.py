"""``topograph-slurm slurm save DIR``: options → settings → app.slurm_state → summary."""

from __future__ import annotations

from pathlib import Path

import click

from topograph_slurm.cli.display import environment, show
from topograph_slurm.cli.options import Group, config_settings, output_options
from topograph_slurm.errors import Exit


@click.group("slurm", cls=Group)
def slurm_group() -> None:
    """Slurm's state kept as files: what every command that asks scontrol can read instead
    (--slurm-state DIR; docs/slurm-state.md)."""


@slurm_group.command("save")
@click.argument("directory", metavar="DIR")
@output_options("json", "templates")
@click.pass_context
def save(ctx: click.Context, directory: str, as_json: bool, templates: str | None) -> None:
    """Run each scontrol read the commands make once (show config, nodes, jobs, partitions,
    topology, --version) and write the answers to DIR, for --slurm-state DIR on a host
    without Slurm and in a bug report. DIR is replaced as a whole: only when it is absent,
    empty or a saved state (exit 9 otherwise). A read that fails is exit 4, nothing written;
    `show topology` without a topology plugin is left out and said.

    \b
      topograph-slurm slurm save ./slurm-state
      topograph-slurm occupancy --slurm-state ./slurm-state
    """
    from topograph_slurm.app.slurm_state import save as run_save
    from topograph_slurm.render.slurm_state import render_saved

    env = environment(ctx)  # a bad templates directory fails before any read
    saved = run_save(config_settings(ctx), Path(directory))
    show(render_saved(env, Path(directory), saved.files, saved.missing, as_json))
    ctx.exit(Exit.OK)
