"""``topograph-slurm slurm save DIR``: options → settings → app.slurm_state → summary."""

from __future__ import annotations

from pathlib import Path

import click

from topograph_slurm.cli.options import config_settings
from topograph_slurm.errors import Exit


@click.group("slurm")
def slurm_group() -> None:
    """Slurm's state kept as files: what every command that asks scontrol can read instead
    (--slurm-state DIR; docs/slurm-state.md)."""


@slurm_group.command("save")
@click.argument("directory", metavar="DIR")
@click.option("--json", "as_json", is_flag=True, help="The versioned JSON summary.")
@click.pass_context
def save(ctx: click.Context, directory: str, as_json: bool) -> None:
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
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.slurm_state import render_saved

    settings = config_settings(ctx)
    saved = run_save(settings, Path(directory))
    env = environment(Path(settings.templates) if settings.templates else None)
    click.echo(render_saved(env, Path(directory), saved.files, saved.missing, as_json), nl=False)
    ctx.exit(Exit.OK)
