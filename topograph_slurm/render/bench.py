"""What ``bench`` prints and records: the plan, every run's result, the per-level judgement,
as plain data (the JSON record in the snapshot, ``--json``) and as text through
``templates/bench.plan.txt.j2`` and ``templates/bench.report.txt.j2``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import jinja2

from topograph_slurm.analysis.bench.judge import Judgement
from topograph_slurm.model.bench import BenchPlan, RunResult
from topograph_slurm.render.environment import printable, render

#: What each level's runs measure, for the plan and the report.
LEVEL_WORDS = {
    "node": "intra-node: all GPUs of one node",
    "domain": "pairs inside one NVLink domain/block",
    "leaf": "pairs under one leaf switch",
    "island": "pairs across the top switches of one island",
    "fabric": "pairs across islands",
}


#: ``bench --plan --json``'s format and version (docs/bench.md).
PLAN_FORMAT = "topograph-slurm-bench-plan"
PLAN_VERSION = 1


def level_words(level: str, across: str = "") -> str:
    """What a level's runs measure; *across* is the level its pairs cross (``leaf``)."""
    if level.startswith("spine-"):
        return f"pairs across {across or 'child'} units under one level-{level[6:]} spine"
    return LEVEL_WORDS.get(level, level)


def plan_data(plan: BenchPlan, argv: Sequence[str] = ()) -> dict[str, Any]:
    """The plan as data: per level its runs (nodes, round, uplinks crossed) and notes."""
    return {
        "gpus_per_node": plan.gpus_per_node,
        "nodes": len(plan.nodes),
        "rounds": plan.rounds,
        "runs": len(plan.runs),
        "command": list(argv),
        "excluded": dict(plan.excluded),
        "levels": [
            {
                "level": level.level,
                "what": level_words(level.level, level.across),
                "across": level.across,
                "notes": level.notes,
                "runs": [
                    {
                        "nodes": list(run.nodes),
                        "round": run.round,
                        "uplinks": [list(u) for u in run.uplinks],
                    }
                    for run in level.runs
                ],
            }
            for level in plan.levels
        ],
    }


def result_data(result: RunResult) -> dict[str, Any]:
    """One run as recorded: command, timing, outcome, busbw and every size's numbers."""
    output = result.output
    return {
        "level": result.run.level,
        "nodes": list(result.run.nodes),
        "round": result.run.round,
        "argv": result.argv,
        "started": result.started,
        "duration": result.duration,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "error": result.error,
        "busbw": result.busbw,
        "avg_busbw": output.avg_busbw if output else None,
        "nccl_tests_version": output.version if output else "",
        "nccl_library": output.nccl_library if output else "",
        "notes": output.notes if output else [],
        "rows": [asdict(row) for row in output.rows] if output else [],
        "stderr_tail": result.stderr_tail,
    }


def record_data(
    plan: BenchPlan,
    results: Sequence[RunResult],
    judgement: Judgement,
    facts: Mapping[str, Any],
) -> dict[str, Any]:
    """The whole record: *facts* (format, version, created, versions, command, settings),
    the plan, the results, the per-level summary and the findings."""
    return {
        **facts,
        "plan": plan_data(plan),
        "results": [result_data(r) for r in results],
        "levels": [asdict(level) for level in judgement.levels],
        "findings": [asdict(f) for f in judgement.findings],
    }


def render_plan(
    env: jinja2.Environment, plan: BenchPlan, argv: Sequence[str], fmt: str, timeout: float
) -> str:
    """The plan, with the bound on how long it runs: every round at most one run's timeout
    (a round's runs go in parallel)."""
    data = plan_data(plan, argv) | {"timeout": timeout, "bound": plan.rounds * timeout}
    if fmt == "json":
        versioned = {"format": PLAN_FORMAT, "version": PLAN_VERSION, **data}
        return json.dumps(versioned, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "bench.plan.txt.j2", **data)


def render_report(env: jinja2.Environment, record: Mapping[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(record, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "bench.report.txt.j2", **record)
