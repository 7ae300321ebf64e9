"""``topograph-slurm bench``: nccl-tests per fabric level, planned from the fabric, run inside
one allocation, judged per level, recorded in a snapshot."""

from __future__ import annotations

from typing import Any

import click

from topograph_slurm.app.bench import JudgeSettings
from topograph_slurm.cli.display import environment, log, show, warn
from topograph_slurm.cli.options import (
    GPUS_PER_NODE,
    JOB_HEADING,
    AsciiIntRange,
    FiniteFloatRange,
    command,
    fabric_options,
    flag_settings,
    grouped,
    nodes_option,
    output_options,
)
from topograph_slurm.cli.progress import ProgressBar, progress_wanted
from topograph_slurm.errors import Exit
from topograph_slurm.model.bench import TESTS

_DEFAULT_ARGS = "-b 512M -e 8G -f 2 -g 1"
_BENCH_KEYS = (
    "plan_only",
    "all_pairs",
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
    "out_dir",
    "baseline",
    "as_json",
)
#: The judge's default thresholds, shown by --help (one place for the numbers).
_JUDGE = JudgeSettings()
_FRACTION = FiniteFloatRange(0, 1, min_open=True, max_open=True)


@command(aliases={"--record": "--out-dir"})
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan; run nothing.")
@click.option(
    "--levels",
    metavar="LIST",
    help="Only these fabric levels, comma-separated (node, domain, leaf, spine-1, ..., island, "
    "fabric, those a run can span in this fabric). Default: all.",
)
@click.option(
    "--max-pairs",
    type=AsciiIntRange(min=1),
    metavar="N",
    help="At most N pairs per level, spread over the level (default 64; the plan notes "
    "what was dropped).",
)
@click.option(
    "--all-pairs",
    is_flag=True,
    help="Every pair of every level, no cap (65,536 runs on 16,384 nodes: see the plan's "
    "bound first).",
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
    type=FiniteFloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    metavar="S",
    help="Seconds per run; a run past it is killed and recorded as timed out.",
)
@click.option(
    "--parallel",
    type=AsciiIntRange(min=1),
    default=32,
    show_default=True,
    metavar="N",
    help="Runs of one round started at once, at most.",
)
@click.option(
    "--slow-fraction",
    type=_FRACTION,
    metavar="FRACTION",
    default=_JUDGE.slow_fraction,
    show_default=True,
    help="A run below this fraction of its level's median is slow.",
)
@click.option(
    "--expected-fraction",
    type=_FRACTION,
    metavar="FRACTION",
    default=_JUDGE.expected_fraction,
    show_default=True,
    help="A run below this fraction of the fabric's rate (NVLink, IB rails) is slow.",
)
@click.option(
    "--drift",
    type=FiniteFloatRange(min=0, min_open=True),
    metavar="FRACTION",
    default=_JUDGE.drift,
    show_default=True,
    help="A level median that moved more than this fraction since the baseline is a finding.",
)
@click.option(
    "--baseline",
    metavar="FILE|DIR",
    help="The previous bench.json (or its snapshot) to compare medians with; default: the "
    "one --out-dir replaces.",
)
@grouped(
    JOB_HEADING,
    [
        nodes_option(
            "Nodes to benchmark (an empty list is refused). Default: the allocation's "
            "($SLURM_JOB_NODELIST); with --plan outside one, every node of the fabric."
        ),
        GPUS_PER_NODE,
    ],
)
@output_options("out_dir", "json", "templates")
@fabric_options
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

    --out-dir DIR records the run as DIR/bench.json: into the snapshot DIR, or a new one
    (the record --bench FILE|DIR reads in pools, health and record start).

    \b
    Examples:
      topograph-slurm bench --plan --sim demo
      salloc -N 32 --exclusive topograph-slurm bench --snapshot /var/lib/topograph/snap \\
          --out-dir /var/lib/topograph/bench-$(date +%F)
    """
    from topograph_slurm.app import bench as use_case
    from topograph_slurm.render.bench import render_plan, render_report

    opts = {key: flags.pop(key) for key in _BENCH_KEYS}
    opts["record"] = opts.pop("out_dir")  # DIR/bench.json: the bench record
    flags.pop("templates")
    rewrites = flags.pop("rewrites")
    settings = flag_settings(ctx, rewrites, **flags)
    planned = use_case.plan_runs(settings, opts, warn)
    plan, command = planned.plan, planned.command
    env = environment(ctx)
    fmt = "json" if opts["as_json"] else "text"
    if opts["plan_only"]:
        argv = command.argv(plan.runs[0])
        show(render_plan(env, plan, argv, fmt, command.timeout))
        return
    bar = progress_wanted(ctx.obj["quiet"])
    problems = use_case.run(
        planned,
        opts,
        lambda total: ProgressBar(total, bar, "benchmarking"),
        lambda message: log(ctx, message),
        lambda record: show(render_report(env, record, fmt)),
    )
    ctx.exit(Exit.DIFFERS if problems else Exit.OK)
