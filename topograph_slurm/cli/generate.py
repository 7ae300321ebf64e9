"""``topograph-slurm generate``: flags → settings → :func:`topograph_slurm.app.generate.run`
(the whole run in its order) → exit code."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import click

from topograph_slurm.app import generate as use_case
from topograph_slurm.cli.display import Console, warn
from topograph_slurm.cli.options import (
    ASCII_INT,
    FINITE_FLOAT,
    SLURM_VERSION,
    command,
    fabric_options,
    flag_settings,
    output_options,
)
from topograph_slurm.config import Settings, choices_metavar
from topograph_slurm.model.numbers import natural


def _parse_sizes(value: str | None) -> list[int] | None:
    if not value:
        return None
    sizes = [natural(part) for part in value.split(",")]  # int() reads "3_3_8" as 338
    if None in sizes:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}")
    return [size for size in sizes if size is not None]


def _report_format(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The old ``--report-format``: still taken (one warning line), as ``--json`` now says."""
    if value is not None:
        warn("--report-format is now --json; the old spelling goes in the next release")
    return value


@command()
@click.option(
    "--format",
    "fmt",
    metavar=choices_metavar("format"),
    help="tree or block topology.conf, or topology.yaml with several named topologies (25.05+); "
    "default tree.",
)
@click.option(
    "--force", is_flag=True, help="Replace PATH even when the node count shrinks past the limit."
)
@click.option(
    "--shrink-limit",
    type=FINITE_FLOAT,
    metavar="FRACTION",
    help="Largest allowed node-count drop, 0 to 1 (default 0.10).",
)
@click.option(
    "--report",
    metavar="-|FILE",
    help="Write a report: placement, exclusions with reasons, findings (JSON with --json). "
    "FILE.html is a page with the fabric pictures above the text report (so not with --json); "
    "'-' prints it to stdout when -o names a file, else to stderr (stdout holds the topology).",
)
@click.option(
    "--report-format",
    metavar=choices_metavar("report_format"),
    hidden=True,
    callback=_report_format,
    help="The old spelling of --json (text|json).",
)
@click.option(
    "--max-tiers",
    type=ASCII_INT,
    metavar="N",
    help="Keep at most this many switch levels (leaves count as one).",
)
@click.option(
    "--block-sizes", metavar="N,2N,…", help="BlockSizes to use instead of inferring them."
)
@click.option(
    "--filter-dir",
    metavar="DIR",
    help="Also render the --tp-size filters (job_submit.lua, cli_filter.lua, SPANK source, "
    "plugstack line) into DIR from the config's 'filter' facts and this fabric.",
)
@click.option(
    "--nvlink-unhealthy",
    metavar=choices_metavar("nvlink_unhealthy"),
    help="Nodes whose NVLink fabric is not healthy: leave them out of blocks (default) or keep "
    "them in their rack's block; either way they are findings.",
)
@click.option(
    "--block-name-pattern",
    metavar="PATTERN",
    help="NVLink block names, e.g. 'nvl-{first}' (default) or 'rack{index:02d}'.",
)
@click.option(
    "--layout",
    metavar="FILE",
    help="Previous topology.conf/topology.yaml (or racks list) whose NVLink block names and "
    "positions stay stable; default: the -o file.",
)
@click.option(
    "--reconfigure",
    is_flag=True,
    default=None,
    help="After a changed write of -o PATH: scontrol reconfigure (never a restart), then check "
    "that slurmctld runs what was written; if not, put the previous file back, keep the "
    "candidate as PATH.rejected and exit 10 with Slurm's reason. Without scontrol here: exit 4, "
    "nothing written. On Slurm up to 26.05 with PrologFlags=DeferBatch it first waits for jobs "
    "in their prolog (--reconfigure-wait).",
)
@click.option(
    "--reconfigure-wait",
    metavar="DURATION",
    help="On Slurm up to 26.05 with PrologFlags=DeferBatch, --reconfigure waits while any "
    "job is in its prolog (a reconfigure then loses the job's batch launch), for at most "
    "this long, e.g. 10m (default), 90s; 0 = not at all. Past it: the previous file is "
    "restored, the candidate kept as PATH.deferred, exit 12.",
)
@click.option(
    "--state-dir",
    metavar="DIR",
    help="Where the run keeps its state for -o PATH (the fabric summary, the lock), never "
    "beside PATH: default /var/lib/topograph-slurm as root, else "
    "$XDG_STATE_HOME/topograph-slurm (~/.local/state/topograph-slurm). State an older "
    "release kept beside PATH moves here on the first run.",
)
@click.option(
    "--keep-missing",
    metavar="DURATION",
    help="A node Slurm still lists (--slurm-nodes; without a node list, any node the last "
    "run placed) but the sweep missed keeps its last leaf and block for this long since it "
    "was last seen, e.g. 7d (default), 36h; 0 = off. Needs -o FILE (the last place comes "
    "from the summary kept for it).",
)
@click.option(
    "--yaml-default",
    metavar="NAME",
    help="--format yaml: the topology that is cluster_default (default: the first).",
)
@SLURM_VERSION
@output_options("output", "json", "check", "diff", "metrics", "templates")
@fabric_options
@click.pass_context
def generate(
    ctx: click.Context,
    /,
    check: bool,
    diff: bool,
    force: bool,
    rewrites: Sequence[str],
    block_sizes: str | None,
    fmt: str | None,
    as_json: bool,
    metrics_file: str | None,
    **flags: Any,
) -> None:
    """Generate Slurm topology.conf (tree or block) or topology.yaml from the fabric.

    -o PATH writes the topology (atomic, only on change); --check says too when PATH was
    made for another Slurm release or node list (pin --slurm-version, --slurm-nodes in CI).
    --json makes the run report JSON: with --report FILE there, else on stdout instead of the
    topology. --metrics FILE.prom is written on failure too (topograph_slurm_success 0).

    \b
    Examples:
      topograph-slurm generate --sim demo
      topograph-slurm generate --ibnetdiscover fabric.txt --format block -o /etc/slurm/topology.conf
      topograph-slurm generate --snapshot /var/lib/topograph/snap --format block
      topograph-slurm generate --ufm https://ufm --ufm-credentials /etc/topograph-slurm/ufm.cred
      topograph-slurm generate -o /etc/slurm/topology.conf --check   # in CI: exit 1 when stale
    """
    flags["metrics"] = metrics_file
    # --json: the report as JSON; on stdout, instead of the topology, unless --report names a file
    json_out = as_json and flags["report"] in (None, "-")
    if as_json:
        flags["report_format"] = "json"
        flags["report"] = flags["report"] or "-"

    def read_settings() -> Settings:
        settings = flag_settings(
            ctx,
            rewrites,
            block_sizes=_parse_sizes(block_sizes),
            format=fmt,
            **flags,
        )
        if settings.output == "-":  # stdout, as without -o: no file named '-', no state kept for it
            settings = dataclasses.replace(settings, output=None)
        if (check or diff) and settings.output is None and settings.filter_dir is None:
            raise click.UsageError("--check and --diff need -o PATH or --filter-dir DIR")
        return settings

    config_file = (ctx.obj or {}).get("config_file")
    request = use_case.Request(check, diff, force, flags, config_file, json_out)
    ctx.exit(use_case.run(read_settings, request, Console(ctx)))
