"""Two job records compared: why two runs of one config may differ. What changes the speed a
job can reach (its layout, how many leaves and blocks it spans, its crossings, the problems on
its paths, a bench median that drifted) *matters*; what only names another place or file (node
and unit names, the fingerprint, the topology file's hash) is shown but does not."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from topograph_slurm.model.record import JobRecord, RecordChange, RecordDiff

#: A bench median that moved by more than this share between two records is drift.
BENCH_DRIFT = 0.10


def diff_records(a: JobRecord, b: JobRecord, a_name: str, b_name: str) -> RecordDiff:
    """Every difference between records *a* and *b*, in the order docs/record.md lists."""
    changes = [
        change for compare in _COMPARISONS for change in compare(a, b) if change.a != change.b
    ]
    return RecordDiff(a_name, b_name, changes)


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
