"""``topograph-slurm spank build``: compile the --tp-size SPANK plugin."""

from __future__ import annotations

from pathlib import Path

import click

from topograph_slurm.cli.display import log, show, templates_dir
from topograph_slurm.cli.options import Group, output_options


@click.group(cls=Group)
def spank() -> None:
    """Build the --tp-size SPANK plugin."""


@spank.command("build", aliases={"-o": "--out-dir", "--outdir": "--out-dir"})
@click.option(
    "--source",
    default="tpsize.c",
    show_default=True,
    metavar="FILE",
    help="Plugin source rendered by generate --filter-dir.",
)
@click.option("--cc", default="cc", show_default=True, help="C compiler.")
@click.option(
    "--include-dir",
    metavar="DIR",
    help="Directory holding slurm/spank.h (default: the compiler's path; Debian: libslurm-dev).",
)
@output_options("out_dir", "templates")
@click.pass_context
def spank_build(
    ctx: click.Context,
    /,
    source: str,
    cc: str,
    include_dir: str | None,
    out_dir: str | None,
    templates: str | None,
) -> None:
    """Compile the SPANK plugin that registers --tp-size for sbatch/salloc/srun into
    --out-dir (default: the current directory).

    Rebuild it for every Slurm major release. Then add the printed line to plugstack.conf on
    login and compute nodes (and the controller).
    """
    from topograph_slurm.app.spank import build

    plugin, line = build(
        templates_dir(ctx),
        Path(source),
        Path(out_dir or "."),
        cc,
        Path(include_dir) if include_dir else None,
    )
    log(ctx, f"built {plugin}")
    show(line)
