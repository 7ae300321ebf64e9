"""``topograph-slurm generate``: flags → settings → :func:`topograph_slurm.app.generate.generate`
→ guarded writes → exit code."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from topograph_slurm.app import generate as use_case
from topograph_slurm.app.state import prepare_state
from topograph_slurm.cli.display import environment, log, show, warn, write, write_files
from topograph_slurm.cli.options import (
    ASCII_INT,
    FINITE_FLOAT,
    SLURM_VERSION,
    command,
    fabric_options,
    flag_settings,
    output_options,
)
from topograph_slurm.config import (
    Settings,
    choices_metavar,
    config_path,
    state_dir,
)
from topograph_slurm.errors import Exit, InputError
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import MadeWith


def _parse_sizes(value: str | None) -> list[int] | None:
    if not value:
        return None
    sizes = [natural(part) for part in value.split(",")]  # int() reads "3_3_8" as 338
    if None in sizes:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}")
    return [size for size in sizes if size is not None]


def _config_metrics(ctx: click.Context) -> str | None:
    """The config's ``metrics`` file as far as the config can be read at all (YAML with the
    key as a string), so a run whose config is refused still tells alerting it failed."""
    import yaml

    path, _required = config_path((ctx.obj or {}).get("config_file"))
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (
        OSError,
        ValueError,
        RecursionError,
        yaml.YAMLError,
    ):  # ValueError: bad UTF-8, huge ints
        return None
    found = data.get("metrics") if isinstance(data, dict) else None
    return found if isinstance(found, str) and found else None


def _emit_report(ctx: click.Context, settings: Settings, text: str, json_out: bool) -> None:
    """The report to a file, or to stdout (stderr when the topology itself goes to stdout:
    without -o, unless --json puts the report there instead)."""
    if settings.report == "-":
        click.echo(text, nl=False, err=settings.output is None and not json_out)
    elif settings.report:
        write(ctx, settings.report, text, settings=settings)


def _write(
    ctx: click.Context,
    settings: Settings,
    content: str,
    made: MadeWith | None,
    modes: tuple[bool, bool, bool],
    force: bool,
    run: use_case.Run,
) -> int:
    """Print or write the topology; returns the exit code. A stale --check says when the
    file was *made* with another release or node list than this run's (another host).
    *modes*: --check, --diff, and whether --json's report holds stdout (then no topology)."""
    check, diff, json_out = modes
    if settings.output is None:
        if not (check or diff or json_out):  # --check --filter-dir alone checks the filters
            show(content)
        return Exit.OK
    from topograph_slurm.output import write_topology

    outcome = write_topology(
        Path(settings.output),
        content,
        check=check,
        show_diff=diff,
        force=force,
        shrink_limit=settings.shrink_limit,
        lock_timeout=settings.lock_timeout,
        state_dir=state_dir(settings),
    )
    if (check or diff) and outcome.diff:
        show(outcome.diff)
    if check and not outcome.changed:
        log(ctx, f"{settings.output}: up to date")
    if check and outcome.changed:
        why = use_case.environment_change(outcome.old, made)
        log(
            ctx,
            f"{settings.output}: out of date"
            + (f"; the environment differs: {why}" if why else ""),
        )
    if check:
        return Exit.DIFFERS if outcome.changed else Exit.OK
    run.written = outcome.written
    state = "written" if outcome.written else "unchanged"
    log(ctx, f"{settings.output}: {state} ({outcome.new_nodes} nodes)")
    return Exit.OK


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
    run = use_case.Run()
    guess = None if check else lambda: _config_metrics(ctx)
    target = use_case.MetricsTarget(None if check else flags.get("metrics"), guess=guess)
    with use_case.failure_metrics(target, run):
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
        settings = use_case.check_flags(settings, check, flags)
        target.settle(settings)
        if not check:  # the state directory checked before anything is written
            moved = prepare_state(settings)
            if moved:
                log(ctx, moved)
        env = environment(ctx)
        target.env = env
        result = use_case.generate(settings, env, warn)
        if settings.report:
            _emit_report(ctx, settings, result.report, json_out)
        if result.topology is None:
            raise InputError("nothing could be placed: no host became a Slurm node (see --report)")
        topology = result.topology
        code = use_case.reconfigured(
            settings,
            topology,
            run,
            lambda: _write(
                ctx, settings, topology, result.made, (check, diff, json_out), force, run
            ),
            lambda message: log(ctx, message),
        )
        if result.partition_lines:
            log(ctx, "Partitions for slurm.conf:\n" + result.partition_lines.rstrip())
        if settings.filter_dir:
            code = max(code, _write_filters(ctx, settings, result.filters, check, diff))
        # Record state only after success: reached only when every write (and slurmctld's
        # reconfigure, when asked) took; a failure above leaves the previous record alone.
        if not check:
            use_case.record_state(settings, result)
        use_case.record_success(settings, target, result, run)
    ctx.exit(code)


def _write_filters(
    ctx: click.Context, settings: Settings, files: dict[str, str], check: bool, diff: bool
) -> int:
    """Write the filter files (atomic, only on change); 1 when --check finds them stale."""
    directory = str(settings.filter_dir)
    return write_files(ctx, directory, files, check=check, diff=diff, settings=settings)
