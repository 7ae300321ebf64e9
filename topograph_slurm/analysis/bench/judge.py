"""Judge benchmark results per fabric level: which runs are slow, and what the slow runs
point at — a node, an uplink, one path — plus levels whose median drifted since last time.

A run is slow when it failed (a timeout, a crash, wrong results) or its bus bandwidth is below
``slow_fraction`` of its level's median, or below ``expected_fraction`` of what the fabric
says it should carry (so a level that is slow as a whole is caught too). Then:

- a node is ``slow-node`` when its own intra-node run is slow, or when it has at least two
  pairs and every one of them is slow: a bad node is slow with every partner;
- the slow pairs left are explained by uplinks: an uplink (of a leaf, a spine, a domain) that
  only slow pairs cross is ``slow-link``, the fewest such uplinks that cover them; a slow pair
  that no such uplink explains is a ``slow-link`` on its own path;
- a level whose median moved more than ``drift`` from the previous run's is ``bench-drift``
  (a problem when it dropped, information when it rose).

``health`` turns these into node weights or drain: a ``slow-node`` by its subject, the others
by ``Finding.nodes``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from topograph_slurm.analysis.placement.span import unit_of
from topograph_slurm.model import rates
from topograph_slurm.model.bench import BenchPlan, BenchRun, RunResult
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.placement import LEVEL_DOMAIN, LEVEL_NODE, FabricMap
from topograph_slurm.model.result import LEVEL_INFO, LEVEL_PROBLEM, Finding

#: GB/s one NVLink carries per direction on NVLink 3 and 4 (A100, H100): what ``NV12``/``NV18``
#: in ``nvidia-smi topo -m`` multiply.
NVLINK_GBS = 25.0


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """The thresholds: a run below ``slow_fraction`` × its level's median or below
    ``expected_fraction`` × the fabric's rate is slow; a level median that moved by more than
    ``drift`` (a fraction) since the baseline is drift."""

    slow_fraction: float = 0.8
    expected_fraction: float = 0.5
    drift: float = 0.1


@dataclass(slots=True)
class LevelSummary:
    """One level's numbers: runs, failed runs, slow runs, the median busbw of the runs that
    worked, the lowest expected rate of its runs, and the baseline median."""

    level: str
    runs: int
    failed: int
    slow: int
    median: float | None
    expected: float | None
    baseline: float | None = None


@dataclass(slots=True)
class Judgement:
    levels: list[LevelSummary]
    findings: list[Finding]
    slow: dict[str, str] = field(default_factory=dict)


def expected_rates(
    plan: BenchPlan,
    rails: Mapping[str, Sequence[tuple[str, str]]],
    topologies: Mapping[str, GpuTopology],
    nvlink_domains: bool = False,
) -> dict[str, float]:
    """What each run should carry, in GB/s, where the fabric says: NVLink inside a node (and
    inside an NVLink domain) from ``topo -m`` (bonded links × :data:`NVLINK_GBS`, the weakest
    GPU pair), InfiniBand between nodes from the rails (lanes × lane rate, summed over rails,
    the weaker end)."""
    nvlink = {node: _nvlink_gbs(topo) for node, topo in topologies.items()}
    ib = {node: sum(rates.gbps(*rate) for rate in links) / 8 for node, links in rails.items()}
    expected = {}
    for run in plan.runs:
        source = (
            nvlink
            if run.level == LEVEL_NODE or (run.level == LEVEL_DOMAIN and nvlink_domains)
            else ib
        )
        values = [source.get(node, 0.0) for node in run.nodes]
        if all(values):
            expected[run.key] = min(values)
    return expected


def _nvlink_gbs(topo: GpuTopology) -> float:
    links = [topo.nvlinks(a, b) for a, b in topo.gpu_links]
    return min(links, default=0) * NVLINK_GBS


def judge(
    plan: BenchPlan,
    fmap: FabricMap,
    results: Sequence[RunResult],
    expected: Mapping[str, float],
    settings: JudgeSettings = JudgeSettings(),
    baseline: Mapping[str, float] | None = None,
) -> Judgement:
    """Slow runs, the findings they add up to, and every level's summary."""
    medians = _medians(results)
    slow = {
        r.run.key: reason
        for r in results
        if (reason := _slow_reason(r, medians.get(r.run.level), expected.get(r.run.key), settings))
    }
    findings = _node_findings(results, slow)
    bad_nodes = {f.subject for f in findings}
    findings += _link_findings(plan, fmap, results, slow, bad_nodes)
    levels = _summaries(plan, results, slow, medians, expected, baseline or {})
    findings += _drift(levels, plan, settings.drift)
    return Judgement(levels, findings, slow)


def _medians(results: Sequence[RunResult]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for result in results:
        if result.ok and result.busbw is not None:
            values.setdefault(result.run.level, []).append(result.busbw)
    return {level: statistics.median(v) for level, v in values.items()}


def _slow_reason(
    result: RunResult, median: float | None, expected: float | None, settings: JudgeSettings
) -> str:
    """Why *result* is slow, or '' when it is not."""
    if not result.ok or result.busbw is None:
        return result.error or "no result"
    busbw = result.busbw
    if median and busbw < settings.slow_fraction * median:
        return f"{busbw:g} GB/s, {busbw / median:.0%} of the level median {median:g}"
    if expected and busbw < settings.expected_fraction * expected:
        return f"{busbw:g} GB/s, {busbw / expected:.0%} of the expected {expected:g}"
    return ""


def _node_findings(results: Sequence[RunResult], slow: Mapping[str, str]) -> list[Finding]:
    """Nodes slow on their own, or slow with every partner (two at least)."""
    findings = []
    pairs: dict[str, list[RunResult]] = {}
    for result in results:
        run = result.run
        if run.level == LEVEL_NODE and run.key in slow:
            node = run.nodes[0]
            message = f"intra-node run with all its GPUs slow: {slow[run.key]}"
            findings.append(Finding(FindingKind.SLOW_NODE, node, message))
        elif run.level != LEVEL_NODE:
            for node in run.nodes:
                pairs.setdefault(node, []).append(result)
    own = {f.subject for f in findings}
    for node in sorted(pairs, key=natural_key):
        runs = pairs[node]
        if node in own or len(runs) < 2 or any(r.run.key not in slow for r in runs):
            continue
        evidence = "; ".join(
            f"with {_partner(r.run, node)} ({r.run.level}): {slow[r.run.key]}" for r in runs
        )
        findings.append(
            Finding(FindingKind.SLOW_NODE, node, f"slow with every partner: {evidence}")
        )
    return findings


def _partner(run: BenchRun, node: str) -> str:
    return ",".join(n for n in run.nodes if n != node)


def _link_findings(
    plan: BenchPlan,
    fmap: FabricMap,
    results: Sequence[RunResult],
    slow: Mapping[str, str],
    bad_nodes: set[str],
) -> list[Finding]:
    """The fewest uplinks that only slow pairs cross and that cover every slow pair no slow
    node explains; a pair left over is a slow path of its own."""
    pairs = [r for r in results if r.run.level != LEVEL_NODE]
    unexplained = [r for r in pairs if r.run.key in slow and not bad_nodes & set(r.run.nodes)]
    fine_uplinks = {u for r in pairs if r.run.key not in slow for u in r.run.uplinks}
    findings = []
    while unexplained:
        covering: dict[tuple[str, str], list[RunResult]] = {}
        for result in unexplained:
            for uplink in result.run.uplinks:
                if uplink not in fine_uplinks:
                    covering.setdefault(uplink, []).append(result)
        if not covering:
            break
        uplink = max(covering, key=lambda u: (len(covering[u]), u[0], natural_key(u[1])))
        findings.append(_uplink_finding(plan, fmap, uplink, covering[uplink], slow))
        unexplained = [r for r in unexplained if uplink not in r.run.uplinks]
    for result in unexplained:
        a, b = result.run.nodes
        message = (
            f"the {result.run.level} path {a} <-> {b} is slow: {slow[result.run.key]}; "
            "both nodes are fine with other partners"
        )
        findings.append(Finding(FindingKind.SLOW_LINK, f"{a}<->{b}", message, nodes=(a, b)))
    return findings


def _uplink_finding(
    plan: BenchPlan,
    fmap: FabricMap,
    uplink: tuple[str, str],
    runs: Sequence[RunResult],
    slow: Mapping[str, str],
) -> Finding:
    level, unit = uplink
    affected = [n for n in plan.nodes if unit_of(fmap, n, level) == unit]
    evidence = "; ".join(
        f"{'/'.join(r.run.nodes)} ({r.run.level}): {slow[r.run.key]}" for r in runs
    )
    message = (
        f"uplinks of {level} {unit}: every pair that leaves it is slow, pairs inside it are not "
        f"({len(runs)} slow: {evidence})"
    )
    return Finding(FindingKind.SLOW_LINK, unit, message, nodes=tuple(affected))


def _summaries(
    plan: BenchPlan,
    results: Sequence[RunResult],
    slow: Mapping[str, str],
    medians: Mapping[str, float],
    expected: Mapping[str, float],
    baseline: Mapping[str, float],
) -> list[LevelSummary]:
    summaries = []
    for level in plan.levels:
        mine = [r for r in results if r.run.level == level.level]
        rates_ = [expected[r.run.key] for r in mine if r.run.key in expected]
        summaries.append(
            LevelSummary(
                level.level,
                len(mine),
                sum(not r.ok for r in mine),
                sum(r.run.key in slow for r in mine),
                medians.get(level.level),
                min(rates_) if rates_ else None,
                baseline.get(level.level),
            )
        )
    return summaries


def _drift(levels: Sequence[LevelSummary], plan: BenchPlan, threshold: float) -> list[Finding]:
    findings = []
    for summary in levels:
        if not summary.median or not summary.baseline:
            continue
        change = (summary.median - summary.baseline) / summary.baseline
        if abs(change) <= threshold:
            continue
        nodes = sorted(
            {n for r in plan.runs if r.level == summary.level for n in r.nodes}, key=natural_key
        )
        message = (
            f"level {summary.level} median busbw {summary.median:g} GB/s, was "
            f"{summary.baseline:g} ({change:+.0%}, threshold {threshold:.0%})"
        )
        level = LEVEL_PROBLEM if change < 0 else LEVEL_INFO
        findings.append(
            Finding(FindingKind.BENCH_DRIFT, summary.level, message, level, tuple(nodes))
        )
    return findings
