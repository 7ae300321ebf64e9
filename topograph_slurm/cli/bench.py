"""``topograph-slurm bench``: nccl-tests per fabric level, planned from the fabric, run inside
one allocation, judged per level, recorded in a snapshot."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from topograph_slurm.analysis.bench.judge import JudgeSettings
from topograph_slurm.cli.options import fabric_options, flag_settings, log, warn
from topograph_slurm.cli.progress import ProgressBar, progress_wanted
from topograph_slurm.errors import CollectError, Exit, InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.bench import TESTS, BenchPlan, RunResult

if TYPE_CHECKING:
    from topograph_slurm.app.view import FabricView
    from topograph_slurm.collect.bench import BenchCommand

_DEFAULT_ARGS = "-b 512M -e 8G -f 2 -g 1"
_BENCH_KEYS = (
    "plan_only",
    "hostlist",
    "levels",
    "max_pairs",
    "gpus_per_node",
    "test",
    "binary",
    "test_args",
    "launcher",
    "timeout",
    "parallel",
    "slow_fraction",
    "expected_fraction",
    "drift",
    "record",
    "baseline",
    "as_json",
)
#: The judge's default thresholds, shown by --help (one place for the numbers).
_JUDGE = JudgeSettings()
_FRACTION = click.FloatRange(0, 1, min_open=True, max_open=True)


@click.command()
@fabric_options
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan; run nothing.")
@click.option(
    "--nodes",
    "hostlist",
    metavar="HOSTLIST",
    help="Nodes to benchmark. Default: the allocation's ($SLURM_JOB_NODELIST); with --plan "
    "outside one, every node of the fabric.",
)
@click.option(
    "--levels",
    metavar="LIST",
    help="Only these fabric levels, comma-separated (node, domain, leaf, spine-1, ..., island, "
    "fabric, as the fabric has them). Default: all.",
)
@click.option(
    "--max-pairs",
    type=click.IntRange(min=1),
    metavar="N",
    help="At most N pairs per level, spread over the level (for big fabrics; the plan notes "
    "what was dropped).",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    metavar="N",
    help="Ranks (GPUs) per node; default: measured in the snapshot, or the simulation's.",
)
@click.option(
    "--test", type=click.Choice(TESTS), default=TESTS[0], show_default=True, help="nccl-tests."
)
@click.option("--binary", metavar="PATH", help="The test binary on the nodes (default: --test).")
@click.option(
    "--args",
    "test_args",
    metavar="ARGS",
    default=_DEFAULT_ARGS,
    show_default=True,
    help="The test's arguments (large sizes measure links; the largest size is judged).",
)
@click.option(
    "--launcher",
    metavar="CMD",
    default="srun --mpi=pmix",
    show_default=True,
    help="What starts a run; --nodes/--ntasks/--ntasks-per-node/--nodelist are appended.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    metavar="S",
    help="Seconds per run; a run past it is killed and recorded as timed out.",
)
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    metavar="N",
    help="Runs of one round started at once, at most.",
)
@click.option(
    "--slow-fraction",
    type=_FRACTION,
    default=_JUDGE.slow_fraction,
    show_default=True,
    help="A run below this fraction of its level's median is slow.",
)
@click.option(
    "--expected-fraction",
    type=_FRACTION,
    default=_JUDGE.expected_fraction,
    show_default=True,
    help="A run below this fraction of the fabric's rate (NVLink, IB rails) is slow.",
)
@click.option(
    "--drift",
    type=click.FloatRange(min=0, min_open=True),
    default=_JUDGE.drift,
    show_default=True,
    help="A level median that moved more than this fraction since the baseline is a finding.",
)
@click.option(
    "--record",
    metavar="DIR",
    help="Record the run as DIR/bench.json: into the snapshot DIR, or a new one.",
)
@click.option(
    "--baseline",
    metavar="FILE|DIR",
    help="The previous bench.json (or its snapshot) to compare medians with; default: the "
    "one --record replaces.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@click.pass_context
def bench(ctx: click.Context, /, **flags: Any) -> None:
    """Benchmark communication per fabric level and find the slow node or link.

    Plans nccl-tests runs from the fabric (any source generate takes, --sim demo included):
    every node alone with all its GPUs, then per level (NVLink domain/block, leaf, each spine
    level, island) pairs of nodes whose path turns at that level, every node with at least
    two partners so a slow result can be attributed. Pairs that share no switch uplink run in
    the same round. Runs go through srun inside the current allocation (salloc/sbatch).

    A run below --slow-fraction of its level's median or --expected-fraction of its expected
    rate is slow: a node slow with every partner is slow-node, slow pairs that all leave one
    leaf (or spine) are slow-link on its uplinks, a level median that drifted from the
    baseline is bench-drift. Exit 0 when nothing was found, 1 when something was.

    \b
    Examples:
      topograph-slurm bench --plan --sim demo
      salloc -N 32 --exclusive topograph-slurm bench --snapshot /var/lib/topograph/snap \\
          --record /var/lib/topograph/bench-$(date +%F)
    """
    from topograph_slurm.analysis.bench.plan import plan as make_plan
    from topograph_slurm.app.fabric import read_fabric
    from topograph_slurm.app.view import from_fabric
    from topograph_slurm.render.bench import render_plan
    from topograph_slurm.render.environment import environment

    opts = {key: flags.pop(key) for key in _BENCH_KEYS}
    rewrites = flags.pop("rewrites")
    settings = flag_settings(ctx, rewrites, **flags)
    view = from_fabric(read_fabric(settings, warn), settings)
    gpus = opts["gpus_per_node"] or view.gpus_per_node
    if not gpus:
        raise UsageError("--gpus-per-node is needed: the fabric source does not say")
    nodes, excluded = _nodes(opts["hostlist"], opts["plan_only"], list(view.fmap.places))
    levels = [lvl.strip() for lvl in opts["levels"].split(",")] if opts["levels"] else None
    plan = make_plan(view.fmap, nodes, gpus, levels, opts["max_pairs"])
    plan.excluded.update(excluded)
    _check_plan(plan, nodes)
    command = _command(opts, gpus)
    env = environment(None)
    fmt = "json" if opts["as_json"] else "text"
    if opts["plan_only"]:
        click.echo(render_plan(env, plan, command.argv(plan.runs[0]), fmt), nl=False)
        return
    problems = _run(ctx, plan, command, view, opts, fmt)
    ctx.exit(Exit.DIFFERS if problems else Exit.OK)


def _nodes(
    hostlist: str | None, plan_only: bool, fabric: list[str]
) -> tuple[list[str], dict[str, str]]:
    """The nodes to plan for, and those left out with a reason (outside the allocation)."""
    allocation = os.environ.get("SLURM_JOB_NODELIST", "")
    if not plan_only and not os.environ.get("SLURM_JOB_ID"):
        raise UsageError(
            "bench runs inside one allocation: salloc -N ... topograph-slurm bench ... "
            "(or --plan to print the plan only)"
        )
    if hostlist:
        nodes = names.expand(hostlist, "--nodes", UsageError)
    elif allocation:
        return names.expand(allocation, "SLURM_JOB_NODELIST", InputError), {}
    else:
        return fabric, {}
    if plan_only or not allocation:
        return nodes, {}
    inside = set(names.expand(allocation, "SLURM_JOB_NODELIST", InputError))
    return [n for n in nodes if n in inside], {
        n: "not in the allocation" for n in nodes if n not in inside
    }


def _check_plan(plan: BenchPlan, nodes: list[str]) -> None:
    """An empty plan is an error that says why, never a silent success."""
    if plan.runs:
        return
    if not plan.nodes and nodes and all(n in plan.excluded for n in nodes):
        example = next(iter(plan.excluded))
        raise InputError(
            f"none of the {len(nodes)} nodes is on the fabric ({example}: {plan.excluded[example]})"
        )
    raise UsageError("nothing to benchmark: no node, or no run at the chosen --levels")


def _command(opts: dict[str, Any], gpus: int) -> BenchCommand:
    from topograph_slurm.collect.bench import BenchCommand

    try:
        launcher = tuple(shlex.split(opts["launcher"]))
        args = tuple(shlex.split(opts["test_args"]))
    except ValueError as err:
        raise UsageError(f"--launcher/--args: {err}") from None
    if not launcher:
        raise UsageError("--launcher must name a command")
    return BenchCommand(
        launcher,
        opts["binary"] or opts["test"],
        args,
        gpus,
        opts["timeout"],
        opts["parallel"],
    )


def _run(
    ctx: click.Context,
    plan: BenchPlan,
    command: BenchCommand,
    view: FabricView,
    opts: dict[str, Any],
    fmt: str,
) -> bool:
    """Run, judge, print, record; whether anything a site should act on was found. Every
    input is checked before the first step starts; a sweep where every run failed is
    recorded and reported, then exits 4."""
    from topograph_slurm.analysis.bench.judge import expected_rates, judge
    from topograph_slurm.collect.bench import check_launcher, check_record, write_record
    from topograph_slurm.render.bench import record_data, render_report
    from topograph_slurm.render.environment import environment

    thresholds = JudgeSettings(opts["slow_fraction"], opts["expected_fraction"], opts["drift"])
    baseline = _baseline(opts["baseline"], opts["record"])
    if opts["record"]:
        check_record(Path(opts["record"]))
    check_launcher(command)
    facts = _facts(command, opts["test"], view.fmap.source, thresholds)
    start = time.monotonic()
    results = _sweep(ctx, plan, command)
    facts["duration"] = round(time.monotonic() - start, 3)
    paths = view.facts
    expected = expected_rates(
        plan, paths.rails if paths else {}, view.topologies, bool(paths and paths.nvlink_domains)
    )
    judgement = judge(plan, view.fmap, results, expected, thresholds, baseline)
    versions = [r.output.version for r in results if r.output and r.output.version]
    facts["nccl_tests"] = versions[0] if versions else ""
    record = record_data(plan, results, judgement, facts)
    click.echo(render_report(environment(None), record, fmt), nl=False)
    if opts["record"]:
        write_record(Path(opts["record"]), record)
    if not any(r.ok for r in results):
        raise CollectError(f"every run failed (first: {results[0].error}); see the report")
    return any(f.is_problem for f in judgement.findings)


def _sweep(ctx: click.Context, plan: BenchPlan, command: BenchCommand) -> list[RunResult]:
    """Every run, with a progress bar on a terminal."""
    from topograph_slurm.collect.bench import run_plan

    log(ctx, f"bench: {len(plan.runs)} runs in {plan.rounds} rounds on {len(plan.nodes)} nodes")
    with ProgressBar(len(plan.runs), progress_wanted(ctx.obj["quiet"]), "benchmarking") as bar:

        def done(result: RunResult) -> None:
            bar.advance(result.run.key)

        return run_plan(plan, command, done)


def _facts(
    command: BenchCommand, test: str, fabric: str, thresholds: JudgeSettings
) -> dict[str, Any]:
    """The record's header: format, when, versions, the command and the thresholds."""
    from topograph_slurm import __version__
    from topograph_slurm.collect.bench import slurm_version
    from topograph_slurm.collect.plan import now_iso
    from topograph_slurm.sources.snapshot import BENCH_FORMAT, BENCH_VERSION

    return {
        "format": BENCH_FORMAT,
        "version": BENCH_VERSION,
        "created": now_iso(),
        "topograph_slurm": __version__,
        "slurm": slurm_version(command),
        "fabric": fabric,
        "test": test,
        "command": {
            "launcher": list(command.launcher),
            "binary": command.binary,
            "args": list(command.args),
        },
        "timeout": command.timeout,
        "settings": {
            "slow_fraction": thresholds.slow_fraction,
            "expected_fraction": thresholds.expected_fraction,
            "drift": thresholds.drift,
        },
    }


def _baseline(baseline: str | None, record: str | None) -> dict[str, float]:
    """Level medians of the previous run: --baseline, else the record --record replaces."""
    from topograph_slurm.sources.snapshot import BENCH_FILE, load_bench

    if baseline:
        return load_bench(baseline).medians
    if record and (Path(record) / BENCH_FILE).is_file():
        return load_bench(Path(record) / BENCH_FILE).medians
    return {}
