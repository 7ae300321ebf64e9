"""``topograph-slurm``: the command line. Thin on purpose: parse options, call, print, exit.

Every expected failure is a :class:`TopographError` and leaves as one line on stderr with its
own exit code (see :mod:`topograph_slurm.errors`); ``-v`` adds the traceback.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from topograph_slurm import __version__
from topograph_slurm.analysis import Analysis, analyse, ib_blocks
from topograph_slurm.cli_collect import collect
from topograph_slurm.config import RewriteRule, Settings, load_settings, override
from topograph_slurm.errors import ConfigError, Exit, InputError, TopographError
from topograph_slurm.filter import build_spank, filter_facts, render_filters
from topograph_slurm.model import Fabric
from topograph_slurm.output import write_topology, write_tree
from topograph_slurm.render import environment, render
from topograph_slurm.report import render_report
from topograph_slurm.slurm_version import SlurmVersion
from topograph_slurm.sources import ibnetdiscover, sim, ufm
from topograph_slurm.sources.slurm import scontrol_nodes
from topograph_slurm.topology.block import BlockTopology, typical_size
from topograph_slurm.topology.naming import (
    NamingPolicy,
    compile_rewrites,
    expand_hostlist,
    load_node_name_map,
)

FORMATS = ("tree", "block")
#: ``--sim demo``: a small DGX SuperPOD-like fabric (4 scalable units of 8 nodes, 8 rails).
DEMO_SIM = "nodes=32,gpus=8,rails=8,su=8,tiers=2,sharp=1"
TEMPLATES = {"tree": "topology.conf.tree.j2", "block": "topology.conf.block.j2"}


class Cli(click.Group):
    """A click group that turns our errors into one line and a distinct exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TopographError as err:
            _fail(ctx, str(err), err.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as err:  # a bug: still one line, the traceback only with -v
            _fail(ctx, f"internal error ({type(err).__name__}: {err}); rerun with -v", Exit.BUG)


def _fail(ctx: click.Context, message: str, code: int) -> None:
    """Print one error line (plus the traceback at -v) and exit with *code*."""
    if ctx.obj and ctx.obj.get("verbose", 0) > 0:
        traceback.print_exc()
    click.echo(f"topograph-slurm: error: {message}", err=True)
    sys.exit(int(code))


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topograph-slurm")
@click.option("-v", "--verbose", count=True, help="More detail; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.option(
    "--config",
    "config_file",
    metavar="PATH",
    help="YAML config (default: $TOPOGRAPH_SLURM_CONFIG or /etc/topograph-slurm/config.yaml).",
)
@click.pass_context
def main(ctx: click.Context, verbose: int, quiet: bool, config_file: str | None) -> None:
    """Topology-aware scheduling for GPU clusters on Slurm.

    Collects the fabric (InfiniBand, NVLink), generates Slurm topology config, and builds job
    filters that keep tensor-parallel groups inside one switch block.

    Exit codes: 0 ok, 1 --check found a difference, 2 usage, 3 bad input, 4 collect failure,
    5 config error, 6 write refused by a guard, 7 locked by another run, 8 authentication,
    9 output not writable, 70 internal error.
    """
    ctx.ensure_object(dict)
    ctx.obj.update(verbose=0 if quiet else verbose, quiet=quiet, config_file=config_file)


def _log(ctx: click.Context, message: str) -> None:
    if not ctx.obj.get("quiet"):
        click.echo(message, err=True)


def _read_text(path: str) -> str:
    """A dump file, or stdin for ``-``, decoded leniently (dumps carry stray bytes)."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        return Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None


def _warn(message: str) -> None:
    click.echo(f"topograph-slurm: warning: {message}", err=True)


def fetch_ufm(settings: Settings) -> ufm.UfmResponses:
    """Ask UFM for the fabric (credentials from a file or the environment, never argv)."""
    assert settings.ufm is not None
    return ufm.collect_ufm(
        settings.ufm,
        Path(settings.ufm_credentials) if settings.ufm_credentials else None,
        env=os.environ,
        ca_bundle=Path(settings.ufm_ca_bundle) if settings.ufm_ca_bundle else None,
        insecure=settings.ufm_insecure,
        timeout=settings.ufm_timeout,
        warn=_warn,
    )


def load_fabric(settings: Settings) -> Fabric:
    """The fabric from exactly one source: a dump, UFM, a simulation, or the live ibnetdiscover."""
    given = [flag for flag in ("ibnetdiscover", "sim", "ufm") if getattr(settings, flag)]
    if len(given) > 1:
        raise click.UsageError(
            f"give one fabric source, not {' and '.join('--' + g for g in given)}"
        )
    if settings.ufm:
        return ufm.fabric_from_ufm(fetch_ufm(settings))
    if settings.sim:
        spec = DEMO_SIM if settings.sim == "demo" else settings.sim
        text = sim.generate_ibnetdiscover(sim.parse_sim_spec(spec))
        return ibnetdiscover.parse_ibnetdiscover(text, f"sim:{spec}")
    if settings.ibnetdiscover:
        source = "<stdin>" if settings.ibnetdiscover == "-" else settings.ibnetdiscover
        return ibnetdiscover.parse_ibnetdiscover(_read_text(settings.ibnetdiscover), source)
    command = settings.ibnetdiscover_command
    text = ibnetdiscover.run_ibnetdiscover(command.binary, command.args, command.timeout)
    return ibnetdiscover.parse_ibnetdiscover(text, command.binary)


def naming_policy(settings: Settings) -> NamingPolicy:
    """Node-name map, rewrites and the Slurm node list from settings."""
    policy = NamingPolicy(
        rewrites=compile_rewrites((rule.pattern, rule.replace) for rule in settings.rewrites)
    )
    if settings.node_name_map:
        policy.node_name_map = load_node_name_map(Path(settings.node_name_map))
    if settings.slurm_nodes == "scontrol":
        policy.slurm_nodes = scontrol_nodes()
    elif settings.slurm_nodes:
        policy.slurm_nodes = expand_hostlist(settings.slurm_nodes)
    return policy


def _parse_rewrite(value: str) -> RewriteRule:
    pattern, sep, replacement = value.partition("=>")
    if not sep:
        raise click.BadParameter(f"expected PATTERN=>REPLACEMENT, got {value!r}")
    return RewriteRule(pattern, replacement)


def _parse_sizes(value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None


def _emit_report(ctx: click.Context, settings: Settings, text: str) -> None:
    if settings.report == "-":
        click.echo(text, nl=False, err=settings.output is None)
    elif settings.report:
        try:
            Path(settings.report).write_text(text, encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot write report {settings.report}: {err.strerror}") from None


def _write(
    ctx: click.Context, settings: Settings, content: str, check: bool, diff: bool, force: bool
) -> int:
    """Print or write the topology; returns the exit code."""
    if settings.output is None:
        if check or diff:
            raise click.UsageError("--check and --diff need -o PATH")
        click.echo(content, nl=False)
        return Exit.OK
    outcome = write_topology(
        Path(settings.output),
        content,
        check=check,
        show_diff=diff,
        force=force,
        shrink_limit=settings.shrink_limit,
        lock_timeout=settings.lock_timeout,
    )
    if (check or diff) and outcome.diff:
        click.echo(outcome.diff, nl=False)
    if check:
        _log(ctx, f"{settings.output}: {'out of date' if outcome.changed else 'up to date'}")
        return Exit.DIFFERS if outcome.changed else Exit.OK
    state = "written" if outcome.written else "unchanged"
    _log(ctx, f"{settings.output}: {state} ({outcome.new_nodes} nodes)")
    return Exit.OK


@main.command()
@click.option(
    "--ibnetdiscover",
    metavar="FILE",
    help="Saved ibnetdiscover output ('-' = stdin). Without a source, the live ibnetdiscover runs.",
)
@click.option(
    "--sim",
    metavar="SPEC",
    help="Simulated fabric, e.g. 'nodes=64,rails=8,su=32,tiers=2' or 'demo'.",
)
@click.option(
    "--ufm", metavar="URL", help="Ask NVIDIA UFM's REST API for the fabric (https://host)."
)
@click.option(
    "--ufm-credentials",
    metavar="FILE",
    help="UFM credentials (username/password, token, or client_cert/client_key), mode 0600; "
    "else UFM_USERNAME/UFM_PASSWORD, UFM_TOKEN or UFM_CLIENT_CERT/UFM_CLIENT_KEY.",
)
@click.option("--ufm-ca-bundle", metavar="FILE", help="CA bundle to verify UFM's certificate.")
@click.option(
    "--ufm-insecure",
    is_flag=True,
    default=None,
    help="Do not verify UFM's certificate (warns; for lab use).",
)
@click.option("--ufm-timeout", type=float, metavar="S", help="Per-request timeout (default 30).")
@click.option(
    "--node-name-map", metavar="FILE", help='OpenSM node-name map: 0x<guid> "<name>" per line.'
)
@click.option(
    "--rewrite",
    "rewrites",
    metavar="PATTERN=>REPL",
    multiple=True,
    help="Regex rewrite of HCA descriptions before the host is taken (repeatable).",
)
@click.option(
    "--slurm-nodes",
    metavar="HOSTLIST|scontrol",
    help="Only these hosts become nodes; 'scontrol' asks Slurm.",
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), help="topology.conf flavour (default tree)."
)
@click.option(
    "-o", "--output", metavar="PATH", help="Write here (atomic, only on change) instead of stdout."
)
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 with a diff when PATH is out of date."
)
@click.option("--diff", is_flag=True, help="Print the diff, then write.")
@click.option(
    "--force", is_flag=True, help="Replace PATH even when the node count shrinks past the limit."
)
@click.option(
    "--shrink-limit",
    type=float,
    metavar="FRACTION",
    help="Largest allowed node-count drop (default 0.10).",
)
@click.option(
    "--report",
    metavar="-|FILE",
    help="Write a report: placement, exclusions with reasons, findings.",
)
@click.option(
    "--report-format", type=click.Choice(["text", "json"]), help="Report format (default text)."
)
@click.option(
    "--max-tiers",
    type=click.IntRange(min=1),
    help="Keep at most this many switch levels (leaves count as one).",
)
@click.option(
    "--slurm-version",
    metavar="X.Y",
    help="Target Slurm release (default 24.11): decides block rules.",
)
@click.option(
    "--block-sizes", metavar="N,2N,…", help="BlockSizes to use instead of inferring them."
)
@click.option(
    "--templates", metavar="DIR", help="Directory whose templates override the built-in ones."
)
@click.option(
    "--filter-dir",
    metavar="DIR",
    help="Also render the --tp-size filters (job_submit.lua, cli_filter.lua, SPANK source, "
    "plugstack line) into DIR from the config's 'filter' facts and this fabric.",
)
@click.pass_context
def generate(
    ctx: click.Context,
    ibnetdiscover: str | None,
    sim: str | None,
    ufm: str | None,
    ufm_credentials: str | None,
    ufm_ca_bundle: str | None,
    ufm_insecure: bool | None,
    ufm_timeout: float | None,
    node_name_map: str | None,
    rewrites: Sequence[str],
    slurm_nodes: str | None,
    fmt: str | None,
    output: str | None,
    check: bool,
    diff: bool,
    force: bool,
    shrink_limit: float | None,
    report: str | None,
    report_format: str | None,
    max_tiers: int | None,
    slurm_version: str | None,
    block_sizes: str | None,
    templates: str | None,
    filter_dir: str | None,
) -> None:
    """Generate Slurm topology.conf from the fabric.

    \b
    Examples:
      topograph-slurm generate --sim demo
      topograph-slurm generate --ibnetdiscover fabric.txt --format block -o /etc/slurm/topology.conf
      topograph-slurm generate -o /etc/slurm/topology.conf --check   # in CI: exit 1 when stale
    """
    settings = override(
        load_settings(ctx.obj["config_file"]),
        ibnetdiscover=ibnetdiscover,
        sim=sim,
        ufm=ufm,
        ufm_credentials=ufm_credentials,
        ufm_ca_bundle=ufm_ca_bundle,
        ufm_insecure=ufm_insecure,
        ufm_timeout=ufm_timeout,
        node_name_map=node_name_map,
        rewrites=[_parse_rewrite(value) for value in rewrites],
        slurm_nodes=slurm_nodes,
        format=fmt,
        output=output,
        shrink_limit=shrink_limit,
        report=report,
        report_format=report_format,
        max_tiers=max_tiers,
        slurm_version=slurm_version,
        block_sizes=_parse_sizes(block_sizes),
        templates=templates,
        filter_dir=filter_dir,
    )
    if settings.format not in FORMATS:
        raise click.BadParameter(f"format must be one of {', '.join(FORMATS)}", param_hint="format")
    version = SlurmVersion.parse(settings.slurm_version)
    gc.disable()  # a one-shot batch run allocating ~1M objects: cyclic GC only slows it down
    env = environment(Path(settings.templates) if settings.templates else None)
    analysis = analyse(load_fabric(settings), naming_policy(settings), settings.max_tiers)
    if analysis.node_count == 0:
        if settings.report:
            _emit_report(ctx, settings, render_report(env, analysis, None, settings.report_format))
        raise InputError("the fabric has no host that can become a Slurm node (see --report)")
    blocks = (
        ib_blocks(analysis, version, settings.block_sizes) if settings.format == "block" else None
    )
    content = _render_topology(env, settings.format, analysis, blocks)
    filters = (
        _render_filters(env, settings, analysis, blocks, version) if settings.filter_dir else {}
    )
    if settings.report:
        _emit_report(ctx, settings, render_report(env, analysis, blocks, settings.report_format))
    code = _write(ctx, settings, content, check, diff, force)
    if settings.filter_dir:
        code = max(code, _write_filters(ctx, Path(settings.filter_dir), filters, check, diff))
    ctx.exit(code)


def _render_filters(
    env: Any,
    settings: Settings,
    analysis: Analysis,
    blocks: BlockTopology | None,
    version: SlurmVersion,
) -> dict[str, str]:
    """The --tp-size filter files, with block and leaf sizes measured on this fabric."""
    if not settings.filter:
        raise ConfigError("--filter-dir needs a 'filter' section with partitions in the config")
    plan = blocks or ib_blocks(analysis, version, settings.block_sizes)
    leaf_size = typical_size(len(leaf.nodes) for leaf in analysis.tree.leaves)
    measured = {"block": plan.block_sizes[0], "tree": leaf_size}
    facts = filter_facts(settings.filter, measured, settings.slurm_version)
    return render_filters(facts, env)


def _write_filters(
    ctx: click.Context, directory: Path, files: dict[str, str], check: bool, diff: bool
) -> int:
    """Write the filter files (atomic, only on change); 1 when --check finds them stale."""
    outcomes = write_tree(directory, files, check=check, show_diff=diff)
    changed = [o for o in outcomes if o.changed]
    for outcome in changed:
        if check or diff:
            click.echo(outcome.diff, nl=False)
    _log(
        ctx,
        f"{directory}: {len(changed)} of {len(outcomes)} filter files "
        f"{'out of date' if check else 'written'}",
    )
    return Exit.DIFFERS if check and changed else Exit.OK


def _render_topology(env: Any, fmt: str, analysis: Analysis, blocks: BlockTopology | None) -> str:
    return render(
        env,
        TEMPLATES[fmt],
        tree=analysis.tree,
        blocks=blocks,
        node_count=sum(len(b.nodes) for b in blocks.blocks) if blocks else analysis.node_count,
    )


@main.group()
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
    plugin = build_spank(
        Path(source), Path(outdir), cc=cc, include_dir=Path(include_dir) if include_dir else None
    )
    _log(ctx, f"built {plugin}")
    click.echo(f"optional {plugin.resolve()}")


main.add_command(collect)
