"""``bench``'s use case: nccl-tests runs planned per fabric level from the analysed fabric,
run inside one allocation (:mod:`topograph_slurm.collect.bench`), judged per level, recorded.

The CLI hands over the flags as a mapping and prints what comes back; the progress of a sweep
reaches it through *progress* (a step per run) and a line through *log*, so nothing here
prints.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topograph_slurm.analysis.bench.judge import (
    JudgeSettings as JudgeSettings,  # re-exported: --help shows its defaults
)
from topograph_slurm.app.fabric import Warn, read_fabric
from topograph_slurm.app.view import FabricView, from_fabric
from topograph_slurm.config import Settings
from topograph_slurm.errors import CollectError, InputError, UsageError
from topograph_slurm.model import names
from topograph_slurm.model.bench import BenchPlan, RunResult

if TYPE_CHECKING:
    from topograph_slurm.app.collect import Progress
    from topograph_slurm.collect.bench import BenchCommand


#: Pairs per level a plan keeps unless told otherwise: every pair of a 16,384-node fabric is
#: 65,536 runs; a sample spread over each level finds its slow links in far fewer rounds.
DEFAULT_MAX_PAIRS = 64


@dataclass(slots=True)
class Planned:
    """The fabric view, the plan over it and the command each run starts."""

    view: FabricView
    plan: BenchPlan
    command: BenchCommand


def plan_runs(settings: Settings, opts: Mapping[str, Any], warn: Warn) -> Planned:
    """The runs per level for the nodes *opts* name (the allocation's by default)."""
    from topograph_slurm.analysis.bench.plan import plan as make_plan

    view = from_fabric(read_fabric(settings, warn), settings)
    gpus = opts["gpus_per_node"] or view.gpus_per_node
    if not gpus:
        raise UsageError("--gpus-per-node is needed: the fabric source does not say")
    nodes, excluded = _nodes(opts["hostlist"], opts["plan_only"], list(view.fmap.places))
    levels = [lvl.strip() for lvl in opts["levels"].split(",")] if opts["levels"] else None
    max_pairs = None if opts["all_pairs"] else opts["max_pairs"] or DEFAULT_MAX_PAIRS
    plan = make_plan(view.fmap, nodes, gpus, levels, max_pairs)
    plan.excluded.update(excluded)
    _check_plan(plan, nodes)
    return Planned(view, plan, _command(opts, gpus))


def run(
    planned: Planned,
    opts: Mapping[str, Any],
    progress: Progress,
    log: Callable[[str], None],
    report: Callable[[dict[str, Any]], None],
) -> bool:
    """Run (the sweep, a step of *progress* per run), judge, *report* and record; whether
    anything a site should act on was found. Every input is checked before the first step
    starts; a sweep where every run failed is reported and recorded, then a collect error
    (exit 4)."""
    from topograph_slurm.analysis.bench.judge import expected_rates, judge
    from topograph_slurm.collect.bench import check_launcher, check_record, write_record
    from topograph_slurm.render.bench import record_data

    plan, command, view = planned.plan, planned.command, planned.view
    thresholds = JudgeSettings(opts["slow_fraction"], opts["expected_fraction"], opts["drift"])
    baseline = _baseline(opts["baseline"], opts["record"])
    if opts["record"]:
        check_record(Path(opts["record"]))
    check_launcher(command)
    facts = _facts(command, opts["test"], view.fmap.source, thresholds)
    start = time.monotonic()
    results = _sweep(plan, command, progress, log)
    facts["duration"] = round(time.monotonic() - start, 3)
    paths = view.facts
    expected = expected_rates(
        plan, paths.rails if paths else {}, view.topologies, bool(paths and paths.nvlink_domains)
    )
    judgement = judge(plan, view.fmap, results, expected, thresholds, baseline)
    versions = [r.output.version for r in results if r.output and r.output.version]
    facts["nccl_tests"] = versions[0] if versions else ""
    record = record_data(plan, results, judgement, facts)
    report(record)
    if opts["record"]:
        write_record(Path(opts["record"]), record)
    if not any(r.ok for r in results):
        raise CollectError(f"every run failed (first: {results[0].error}); see the report")
    return any(f.is_problem for f in judgement.findings)


def _sweep(
    plan: BenchPlan, command: BenchCommand, progress: Progress, log: Callable[[str], None]
) -> list[RunResult]:
    """Every run of *plan*, a step of *progress* as each finishes."""
    from topograph_slurm.collect.bench import run_plan

    log(f"bench: {len(plan.runs)} runs in {plan.rounds} rounds on {len(plan.nodes)} nodes")
    with progress(len(plan.runs)) as steps:

        def done(result: RunResult) -> None:
            steps.advance(result.run.key)

        return run_plan(plan, command, done)


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
    if hostlist is not None and not hostlist.strip():  # not the whole allocation: a typo
        raise UsageError("--nodes: empty; name the nodes, or leave --nodes out for them all")
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


def _command(opts: Mapping[str, Any], gpus: int) -> BenchCommand:
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
