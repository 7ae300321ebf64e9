"""``topograph-slurm spank build``: compile the --tp-size SPANK plugin."""

from __future__ import annotations

from pathlib import Path

import click

from topograph_slurm.cli.display import log
from topograph_slurm.cli.options import config_settings


@click.group()
def spank() -> None:
    """Build the --tp-size SPANK plugin."""


@spank.command("build")
@click.option(
    "--source",
    default="tpsize.c",
    show_default=True,
    metavar="FILE",
    help="Plugin source rendered by generate --filter-dir.",
)
@click.option(
    "-o", "--outdir", default=".", show_default=True, metavar="DIR", help="Where the .so goes."
)
@click.option("--cc", default="cc", show_default=True, help="C compiler.")
@click.option(
    "--include-dir",
    metavar="DIR",
    help="Directory holding slurm/spank.h (default: the compiler's path; Debian: libslurm-dev).",
)
@click.pass_context
def spank_build(
    ctx: click.Context, source: str, outdir: str, cc: str, include_dir: str | None
) -> None:
    """Compile the SPANK plugin that registers --tp-size for sbatch/salloc/srun.

    Rebuild it for every Slurm major release. Then add the printed line to plugstack.conf on
    login and compute nodes (and the controller).
    """
    from topograph_slurm.app.spank import build

    plugin, line = build(
        config_settings(ctx),
        Path(source),
        Path(outdir),
        cc,
        Path(include_dir) if include_dir else None,
    )
    log(ctx, f"built {plugin}")
    click.echo(line, nl=False)
