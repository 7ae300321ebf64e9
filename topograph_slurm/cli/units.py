"""``topograph-slurm units``: the systemd service + timer and the cron.d example, filled in."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from topograph_slurm.cli.display import environment, show, warn, write_files
from topograph_slurm.cli.options import METRICS_FILE, OUTPUT_FILE, command, output_options
from topograph_slurm.config import DEFAULT_CONFIG
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


@command(
    aliases={
        "-o": "--service-output",
        "--output": "--service-output",
        "--metrics": "--service-metrics",
        "--config": "--service-config",
    }
)
@click.argument("directory", required=False, metavar="[DIR]")
@click.option(
    "--print",
    "printed",
    type=click.Choice(["service", "timer", "cron"]),
    help="Print one file instead of writing all three into --out-dir.",
)
@click.option("--binary", metavar="PATH", help="topograph-slurm to run (default: the one on PATH).")
@click.option(
    "--service-config",
    metavar="PATH",
    default=str(DEFAULT_CONFIG),
    show_default=True,
    help="Config the run reads (the fabric source and everything else generate needs).",
)
@click.option(
    "--service-output",
    type=OUTPUT_FILE,
    metavar="PATH",
    default=DEFAULT_OUTPUT,
    show_default=True,
    help="The topology file the run writes (its generate -o; generate's rule: a file).",
)
@click.option(
    "--service-metrics",
    type=METRICS_FILE,
    metavar="FILE.prom",
    default=DEFAULT_METRICS,
    show_default=True,
    help="The Prometheus text the run writes (its generate --metrics; generate's rule: "
    "FILE.prom), checked before anything is written.",
)
@output_options("out_dir", "templates")
@click.pass_context
def units(
    ctx: click.Context,
    /,
    directory: str | None,
    printed: str | None,
    binary: str | None,
    service_config: str,
    service_output: str,
    service_metrics: str,
    out_dir: str | None,
    templates: str | None,
) -> None:
    """Write the systemd service and timer and a cron.d example that run
    `generate -o PATH --reconfigure --metrics FILE.prom` hourly.

    Every path is checked before anything is written: --service-output and --service-metrics
    by generate's own rules (a file, FILE.prom), none under /tmp or /var/tmp (the service's
    PrivateTmp=yes hides them: pass --binary, --service-config elsewhere). A path under /home
    or /root (a virtualenv in root's home) makes the service ProtectHome=read-only instead of
    yes, so it stays visible. The service's StateDirectory= makes /var/lib/topograph-slurm
    (generate's state directory as root: the kept summary and the lock) writable; a config's
    state_dir elsewhere needs its own ReadWritePaths= drop-in. The DIR argument is the old
    spelling of --out-dir DIR (warned).

    \b
    Examples:
      topograph-slurm units --out-dir /etc/systemd/system
      systemctl enable --now topograph-slurm.timer
      topograph-slurm units --print cron > /etc/cron.d/topograph-slurm
    """
    from topograph_slurm.render.units import KINDS, UnitPaths, render_units

    if directory is not None:
        if out_dir is not None:
            raise click.UsageError("give --out-dir DIR, not also a DIR argument")
        warn("the DIR argument is now --out-dir DIR; the old spelling goes in the next release")
        out_dir = directory
    if (out_dir is None) == (printed is None):
        raise click.UsageError(
            "give --out-dir DIR to write the files, or --print service|timer|cron"
        )
    paths = UnitPaths(_binary(binary), service_config, service_output, service_metrics)
    files = render_units(environment(ctx), paths)
    if printed is not None:
        show(files[KINDS[printed]])
        return
    ctx.exit(write_files(ctx, str(out_dir), files, kind="unit files"))
