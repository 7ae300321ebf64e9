"""``topograph-slurm units``: the systemd service + timer and the cron.d example, filled in."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from topograph_slurm.cli.display import write_files
from topograph_slurm.cli.options import config_settings
from topograph_slurm.config import DEFAULT_CONFIG, Settings, override
from topograph_slurm.errors import UsageError

DEFAULT_OUTPUT = "/etc/slurm/topology.conf"
#: Debian's prometheus-node-exporter reads its textfile collector from here.
DEFAULT_METRICS = "/var/lib/prometheus/node-exporter/topograph_slurm.prom"


def _binary(given: str | None) -> str:
    """The program ExecStart runs: as given (it must be absolute), else the topograph-slurm
    on PATH."""
    if given:
        return given
    found = shutil.which("topograph-slurm")
    if not found:
        raise UsageError("topograph-slurm is not on PATH: pass --binary /path/to/topograph-slurm")
    return str(Path(found).absolute())


@click.command()
@click.argument("directory", required=False, metavar="[DIR]")
@click.option(
    "--print",
    "show",
    type=click.Choice(["service", "timer", "cron"]),
    help="Print one file instead of writing all three into DIR.",
)
@click.option("--binary", metavar="PATH", help="topograph-slurm to run (default: the one on PATH).")
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    default=str(DEFAULT_CONFIG),
    show_default=True,
    help="Config the run reads (the fabric source and everything else generate needs).",
)
@click.option("-o", "--output", metavar="PATH", default=DEFAULT_OUTPUT, show_default=True)
@click.option("--metrics", metavar="FILE", default=DEFAULT_METRICS, show_default=True)
@click.pass_context
def units(
    ctx: click.Context,
    directory: str | None,
    show: str | None,
    binary: str | None,
    config_path: str,
    output: str,
    metrics: str,
) -> None:
    """Write the systemd service and timer and a cron.d example that run
    `generate -o PATH --reconfigure --metrics FILE` hourly.

    Every path is checked before anything is written: -o and --metrics by generate's own
    rules (a file, FILE.prom), none under /tmp or /var/tmp (the service's PrivateTmp=yes hides
    them: pass --binary, --config elsewhere). A path under /home or /root (a virtualenv in
    root's home) makes the service ProtectHome=read-only instead of yes, so it stays visible.
    The service's StateDirectory= makes /var/lib/topograph-slurm (generate's state directory
    as root: the kept summary and the lock) writable; a config's state_dir elsewhere needs
    its own ReadWritePaths= drop-in.

    \b
    Examples:
      topograph-slurm units /etc/systemd/system && systemctl enable --now topograph-slurm.timer
      topograph-slurm units --print cron > /etc/cron.d/topograph-slurm
    """
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.units import KINDS, UnitPaths, render_units

    if (directory is None) == (show is None):
        raise click.UsageError("give DIR to write the files, or --print service|timer|cron")
    # generate's own rules (--metrics FILE.prom, -o a file): units that fail every hour are
    # refused here, before any file is rendered or written
    override(Settings(), output=output, metrics=metrics)
    templates = config_settings(ctx).templates
    env = environment(Path(templates) if templates else None)
    files = render_units(env, UnitPaths(_binary(binary), config_path, output, metrics))
    if show is not None:
        click.echo(files[KINDS[show]], nl=False)
        return
    ctx.exit(write_files(ctx, str(directory), files, kind="unit files"))
