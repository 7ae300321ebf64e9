"""Bench drift: what changed between two recorded ``bench`` sweeps, added to a fabric drift
(``diff OLD NEW`` when both sides carry a ``bench.json``).

Per level, the median busbw of both sweeps and its change in percent; a median that moved
beyond the threshold (the judge's ``drift`` default, so ``bench`` and ``diff`` agree on what a
move is) is a change, ``bench-slower`` or ``bench-faster``. Slow nodes and slow links appear or
clear by finding kind and subject: the same node slow in both sweeps is no change, whatever
its numbers. A record's own ``bench-drift`` findings are not compared: they measure that sweep
against its baseline, which the per-level medians here already compare directly. What cannot
be compared (one side without a record, a level only one sweep measured) is named in
``not_compared``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from topograph_slurm.analysis.bench.judge import JudgeSettings
from topograph_slurm.model.bench import BenchSummary
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import fold, natural_key
from topograph_slurm.model.result import Change, Drift, Finding, LevelDelta

KIND_BENCH_SLOWER = "bench-slower"
KIND_BENCH_FASTER = "bench-faster"
#: The finding kinds compared, each with its (appeared, cleared) change kinds.
_FINDING_KINDS: dict[str, tuple[str, str]] = {
    FindingKind.SLOW_NODE: ("slow-node-appeared", "slow-node-cleared"),
    FindingKind.SLOW_LINK: ("slow-link-appeared", "slow-link-cleared"),
}
#: Every bench change kind, in the order a drift lists them (after the fabric's).
KINDS: tuple[str, ...] = (
    KIND_BENCH_SLOWER,
    KIND_BENCH_FASTER,
    *(kind for pair in _FINDING_KINDS.values() for kind in pair),
)
_ORDER = {kind: i for i, kind in enumerate(KINDS)}
DEFAULT_THRESHOLD = JudgeSettings().drift


def with_bench(
    fabric: Drift,
    old: BenchSummary | None,
    new: BenchSummary | None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Drift:
    """*fabric* with the changes between two bench records added; when only one side has a
    record, a "not compared" line naming the other; when neither has one, *fabric* as it is."""
    if old is None and new is None:
        return fabric
    if old is None or new is None:
        lacking = fabric.old if old is None else fabric.new
        line = f"benchmark medians, slow nodes and slow links: {lacking} holds no bench record"
        return dataclasses.replace(fabric, not_compared=[*fabric.not_compared, line])
    levels = level_deltas(old, new, threshold)
    changes = list(_level_changes(levels, threshold)) + sorted(
        _finding_changes(old.findings, new.findings),
        key=lambda c: (_ORDER[c.kind], natural_key(c.subject)),
    )
    unmeasured = [
        f"benchmark level {d.level}: only {fabric.old if d.after is None else fabric.new} "
        "has a median"
        for d in levels
        if d.change is None
    ]
    return dataclasses.replace(
        fabric,
        changes=[*fabric.changes, *changes],
        not_compared=[*fabric.not_compared, *unmeasured],
        bench_levels=levels,
    )


def level_deltas(old: BenchSummary, new: BenchSummary, threshold: float) -> list[LevelDelta]:
    """Every level either sweep has a median for: the old record's order, then new levels."""
    names = list(old.medians) + [level for level in new.medians if level not in old.medians]
    deltas = []
    for level in names:
        before, after = old.medians.get(level), new.medians.get(level)
        change = (after - before) / before if before and after is not None else None
        moved = change is not None and abs(change) > threshold
        deltas.append(LevelDelta(level, before, after, change, moved))
    return deltas


def _level_changes(levels: list[LevelDelta], threshold: float) -> Iterator[Change]:
    for delta in levels:
        if not delta.changed or delta.change is None:
            continue
        kind = KIND_BENCH_SLOWER if delta.change < 0 else KIND_BENCH_FASTER
        message = (
            f"median busbw {delta.before:g} -> {delta.after:g} GB/s "
            f"({delta.change:+.0%}, threshold {threshold:.0%})"
        )
        yield Change(kind, delta.level, message)


def _finding_changes(old: list[Finding], new: list[Finding]) -> Iterator[Change]:
    """Slow nodes and slow links in one record and not the other, by kind and subject."""
    before = _by_key(old)
    after = _by_key(new)
    for key in after.keys() - before.keys():
        yield Change(_FINDING_KINDS[key[0]][0], key[1], _evidence(after[key]))
    for key in before.keys() - after.keys():
        yield Change(_FINDING_KINDS[key[0]][1], key[1], f"was: {_evidence(before[key])}")


def _evidence(finding: Finding) -> str:
    """The finding's message, after the nodes behind it when it names them (a slow link)."""
    return f"nodes {fold(finding.nodes)}: {finding.message}" if finding.nodes else finding.message


def _by_key(findings: list[Finding]) -> dict[tuple[str, str], Finding]:
    return {(f.kind, f.subject): f for f in findings if f.kind in _FINDING_KINDS}
