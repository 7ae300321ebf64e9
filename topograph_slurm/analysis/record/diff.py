"""Two job records compared: why two runs of one config may differ. What changes the speed a
job can reach (its layout, how many leaves and blocks it spans, its crossings, the problems on
its paths, a bench median that drifted, links that degraded during the job, tasks bound far
from their GPUs) *matters*; what only names another place or file (node and unit names, the
fingerprint, the topology file's hash) is shown but does not."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from topograph_slurm.model.record import JobRecord, RecordChange, RecordDiff, RecordPart

#: A bench median that moved by more than this share between two records is drift.
BENCH_DRIFT = 0.10


def diff_records(
    a: JobRecord,
    b: JobRecord,
    a_name: str,
    b_name: str,
    a_parts: Sequence[RecordPart] = (),
    b_parts: Sequence[RecordPart] = (),
) -> RecordDiff:
    """Every difference between records *a* and *b* (and the node and task parts their hooks
    wrote), in the order docs/record.md lists."""
    changes = [change for compare in _COMPARISONS for change in compare(a, b)]
    changes += [_during(a_parts, b_parts), _bindings(a_parts, b_parts)]
    return RecordDiff(a_name, b_name, [change for change in changes if change.a != change.b])


def _during(a: Sequence[RecordPart], b: Sequence[RecordPart]) -> RecordChange:
    """The links the Epilog found degraded or erring during each job (node-end parts)."""

    def text(parts: Sequence[RecordPart]) -> str:
        found = sorted(
            {
                f"{finding.kind}@{finding.subject}"
                for part in parts
                if part.part == "node-end"
                for finding in part.findings
                if finding.is_problem
            }
        )
        return ",".join(found) or "none"

    return RecordChange("links degraded during the job", text(a), text(b), True)


def _bindings(a: Sequence[RecordPart], b: Sequence[RecordPart]) -> RecordChange:
    """How each job's tasks were bound (task parts: ``ok``, ``far-numa,ok``...): the statuses
    seen, not their counts, which follow the job's size."""

    def text(parts: Sequence[RecordPart]) -> str:
        return ",".join(sorted({part.binding for part in parts if part.part == "task"})) or "none"

    return RecordChange("task bindings", text(a), text(b), True)


def _layout(a: JobRecord, b: JobRecord) -> list[RecordChange]:
    def text(record: JobRecord) -> str:
        layout = record.layout
        return f"tp={layout.tp},pp={layout.pp},gpn={layout.gpus_per_node}" if layout else "none"

    return [RecordChange("layout", text(a), text(b), True)]


def _units(a: JobRecord, b: JobRecord) -> list[RecordChange]:
    changes = []
    for what in ("leaf", "block", "spine"):
        ua, ub = a.units(what), b.units(what)
        changes.append(RecordChange(f"{what} count", str(len(ua)), str(len(ub)), True))
        changes.append(RecordChange(f"{what} names", ",".join(ua), ",".join(ub), False))
    nodes_a = ",".join(node.node for node in a.nodes)
    nodes_b = ",".join(node.node for node in b.nodes)
    return [*changes, RecordChange("nodes", nodes_a, nodes_b, False)]


def _crossings(a: JobRecord, b: JobRecord) -> list[RecordChange]:
    kinds = list(dict.fromkeys([*a.crossings, *b.crossings]))
    return [
        RecordChange(
            f"{kind} crossings",
            _levels_text(a.crossings.get(kind, {})),
            _levels_text(b.crossings.get(kind, {})),
            True,
        )
        for kind in kinds
    ]


def _levels_text(levels: Mapping[str, int]) -> str:
    return ",".join(f"{level}={count}" for level, count in levels.items() if count) or "none"


def _degraded(a: JobRecord, b: JobRecord) -> list[RecordChange]:
    def text(record: JobRecord) -> str:
        found = sorted({f"{finding.kind}@{finding.subject}" for finding in record.problems})
        return ",".join(found) or "none"

    return [RecordChange("problems on its paths", text(a), text(b), True)]


def _bench(a: JobRecord, b: JobRecord) -> list[RecordChange]:
    changes = []
    for level in [level for level in a.bench if level in b.bench]:
        old, new = a.bench[level], b.bench[level]
        drifted = old > 0 and abs(new - old) / old > BENCH_DRIFT
        if drifted:
            changes.append(RecordChange(f"bench median {level}", f"{old:g}", f"{new:g}", True))
    return changes


def _identity(a: JobRecord, b: JobRecord) -> list[RecordChange]:
    return [
        RecordChange("fingerprint", a.fingerprint, b.fingerprint, False),
        RecordChange("topology sha256", a.topology_sha256, b.topology_sha256, False),
    ]


_COMPARISONS: tuple[Callable[[JobRecord, JobRecord], list[RecordChange]], ...] = (
    _layout,
    _units,
    _crossings,
    _degraded,
    _bench,
    _identity,
)
