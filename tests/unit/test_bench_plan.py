"""The benchmark planner and judge: every node and level covered, pairs span exactly their
level, rounds share no node or uplink, and one planted slow node or slow uplink is always the
one finding the judge makes from the plan's results (hypothesis)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topograph_slurm.analysis.bench.judge import JudgeSettings, judge
from topograph_slurm.analysis.bench.plan import cross_pairs, plan
from topograph_slurm.analysis.placement.span import fabric_map, span
from topograph_slurm.errors import UsageError
from topograph_slurm.model.bench import BenchPlan, BenchRun, RunResult
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.placement import FabricMap
from topograph_slurm.model.result import LeafGroup, Tree, TreeSwitch

FINE, SLOW = 400.0, 150.0


def tree_map(shape: list[list[int]]) -> FabricMap:
    """A tree: spines (one per outer list), each with leaves of the given node counts; a
    second level (one top switch) over several spines."""
    leaves: list[LeafGroup] = []
    uppers: list[TreeSwitch] = []
    number = 0
    for s, spine in enumerate(shape):
        children = []
        for size in spine:
            name = f"leaf{len(leaves) + 1}"
            nodes = [f"n{number + i + 1:03d}" for i in range(size)]
            number += size
            leaves.append(LeafGroup(name, [], nodes))
            children.append(name)
        uppers.append(TreeSwitch(f"spine{s + 1}", 1, [], children))
    if len(shape) > 1:
        uppers.append(TreeSwitch("top", 2, [], [u.name for u in uppers]))
    tops = ["top"] if len(shape) > 1 else ["spine1"]
    return fabric_map(Tree(leaves, uppers, tops))


def nodes_of(fmap: FabricMap) -> list[str]:
    return sorted(fmap.places)


def test_every_node_and_level_covered_and_pairs_span_their_level() -> None:
    fmap = tree_map([[4, 4, 3], [4, 4, 4], [3, 3, 3]])
    bench = plan(fmap, nodes_of(fmap), 8)
    assert [lvl.level for lvl in bench.levels] == ["node", "leaf", "spine-1", "spine-2"]
    for level in bench.levels:
        covered = Counter(n for run in level.runs for n in run.nodes)
        assert set(covered) == set(fmap.places), level.level
        for run in level.runs:
            assert span(fmap, run.nodes) == level.level
        if level.level != "node":
            assert min(covered.values()) >= 2, level.level


def test_rounds_share_no_node_and_no_uplink_and_levels_do_not_mix() -> None:
    fmap = tree_map([[4, 4, 3], [4, 4, 4]])
    bench = plan(fmap, nodes_of(fmap), 4)
    by_round: dict[int, list[BenchRun]] = {}
    for run in bench.runs:
        by_round.setdefault(run.round, []).append(run)
    assert sorted(by_round) == list(range(bench.rounds))
    for runs in by_round.values():
        assert len({run.level for run in runs}) == 1
        used = [r for run in runs for r in (*run.nodes, *run.uplinks)]
        assert len(used) == len(set(used))
    cross = next(lvl for lvl in bench.levels if lvl.level == "spine-2").runs[0]
    assert ("spine-1", "spine1") in cross.uplinks and ("leaf", "leaf1") in cross.uplinks


@pytest.mark.parametrize(
    "sizes", [[1, 1], [3, 1], [2, 2], [5, 1, 1], [3, 3, 3], [4, 2, 1], [1, 1, 1, 1, 1]]
)
def test_cross_pairs_cross_children_and_give_two_partners(sizes: list[int]) -> None:
    names = iter(f"x{i:02d}" for i in range(100))
    children = [[next(names) for _ in range(size)] for size in sizes]
    child_of = {n: i for i, group in enumerate(children) for n in group}
    pairs = set(cross_pairs(children))
    assert all(child_of[a] != child_of[b] for a, b in pairs)
    degree = Counter(n for pair in pairs for n in pair)
    assert set(degree) == set(child_of)
    possible = {n: sum(sizes) - sizes[child_of[n]] for n in child_of}
    assert all(degree[n] >= min(2, possible[n]) for n in child_of)


def test_levels_filter_max_pairs_and_exclusions() -> None:
    fmap = tree_map([[4, 4, 4]])
    bench = plan(fmap, [*nodes_of(fmap), "stranger"], 8, levels=["spine-1"], max_pairs=5)
    assert [lvl.level for lvl in bench.levels] == ["spine-1"]
    assert len(bench.runs) == 5
    assert bench.levels[0].notes == [
        "7 of 12 pairs dropped by --max-pairs 5 (--max-pairs N or --all-pairs for more)"
    ]
    assert bench.excluded == {"stranger": "not on the fabric"}
    with pytest.raises(UsageError, match="--levels: spine-9 not in this fabric"):
        plan(fmap, nodes_of(fmap), 8, levels=["spine-9"])


def test_two_children_are_noted_as_not_attributable() -> None:
    fmap = tree_map([[3, 3]])
    notes = next(lvl for lvl in plan(fmap, nodes_of(fmap), 8).levels if lvl.level == "spine-1")
    assert notes.notes == [
        "spine1 has 2 leaf units: a slow uplink of one looks like the other's at this level"
    ]


def results_for(
    bench: BenchPlan, slow_node: str | None = None, slow_uplink: tuple[str, str] | None = None
) -> list[RunResult]:
    """What the plan measures when one node (with every partner, not alone) or one uplink is
    slow: the stand-in for a cluster, by the same rule a fabric follows."""
    out = []
    for run in bench.runs:
        bad = (slow_node in run.nodes and len(run.nodes) > 1) or slow_uplink in run.uplinks
        out.append(RunResult(run, [], "", 1.0, 0, busbw=SLOW if bad else FINE))
    return out


def expected(bench: BenchPlan) -> dict[str, float]:
    return {run.key: FINE for run in bench.runs}


shapes = st.lists(
    st.lists(st.integers(min_value=3, max_value=5), min_size=3, max_size=4),
    min_size=1,
    max_size=4,
).filter(lambda s: len(s) != 2)


@settings(max_examples=120, deadline=None)
@given(shape=shapes, data=st.data())
def test_one_planted_slow_node_or_uplink_is_the_one_finding(
    shape: list[list[int]], data: st.DataObject
) -> None:
    """A slow node (its NIC or cable: slow with every partner) or a slow leaf or spine uplink,
    planted anywhere, is the judge's only finding, with the nodes behind it."""
    fmap = tree_map(shape)
    bench = plan(fmap, nodes_of(fmap), 8)
    uplinks = sorted({u for run in bench.runs for u in run.uplinks})
    faults = [("node", n) for n in nodes_of(fmap)] + uplinks
    level, unit = data.draw(st.sampled_from(faults))
    behind: set[str] = set()
    if level == "node":
        results = results_for(bench, slow_node=unit)
        wanted = (FindingKind.SLOW_NODE, unit)
    else:
        results = results_for(bench, slow_uplink=(level, unit))
        wanted = (FindingKind.SLOW_LINK, unit)
        behind = {n for n in fmap.places if fmap.places[n].unit(level) == unit}
    found = judge(bench, fmap, results, expected(bench)).findings
    assert [(f.kind, f.subject) for f in found] == [wanted]
    assert set(found[0].nodes) == behind


def test_slow_by_the_level_median_with_evidence() -> None:
    fmap = tree_map([[4, 4, 4, 4, 4, 4]])
    bench = plan(fmap, nodes_of(fmap), 8)
    results = results_for(bench, slow_uplink=("leaf", "leaf3"))
    found = judge(bench, fmap, results, {}).findings
    assert [(f.kind, f.subject) for f in found] == [(FindingKind.SLOW_LINK, "leaf3")]
    assert "uplinks of leaf leaf3" in found[0].message
    assert f"{SLOW:g} GB/s, {SLOW / FINE:.0%} of the level median {FINE:g}" in found[0].message


def test_a_failed_intra_node_run_is_a_slow_node_and_summaries_count_it() -> None:
    fmap = tree_map([[3, 3, 3]])
    bench = plan(fmap, nodes_of(fmap), 8)
    results = results_for(bench)
    results[0] = RunResult(results[0].run, [], "", 5.0, None, True, "timed out after 5 s (killed)")
    judgement = judge(bench, fmap, results, {})
    assert [(f.kind, f.subject) for f in judgement.findings] == [(FindingKind.SLOW_NODE, "n001")]
    assert "timed out after 5 s (killed)" in judgement.findings[0].message
    node = judgement.levels[0]
    assert (node.level, node.runs, node.failed, node.slow, node.median) == ("node", 9, 1, 1, FINE)


def test_a_lone_slow_pair_is_its_own_path() -> None:
    fmap = tree_map([[4, 4, 4]])
    bench = plan(fmap, nodes_of(fmap), 8)
    results = results_for(bench)
    lone = next(i for i, r in enumerate(results) if r.run.level == "leaf")
    results[lone].busbw = SLOW
    a, b = results[lone].run.nodes
    found = judge(bench, fmap, results, {}).findings
    assert [(f.kind, f.subject, f.nodes) for f in found] == [
        (FindingKind.SLOW_LINK, f"{a}<->{b}", (a, b))
    ]


def test_drift_against_the_baseline() -> None:
    fmap = tree_map([[3, 3, 3]])
    bench = plan(fmap, nodes_of(fmap), 8)
    results = results_for(bench)
    baseline = {"node": FINE, "leaf": FINE * 1.5, "spine-1": FINE / 1.5}
    judgement = judge(bench, fmap, results, {}, JudgeSettings(drift=0.1), baseline)
    drift = [(f.subject, f.level) for f in judgement.findings if f.kind == FindingKind.BENCH_DRIFT]
    assert drift == [("leaf", "problem"), ("spine-1", "info")]
    assert "-33%" in judgement.findings[0].message
    assert judgement.levels[1].baseline == FINE * 1.5


def test_nvlink_domains_are_a_level_and_their_uplinks_count() -> None:
    from topograph_slurm.analysis.bench.judge import expected_rates
    from topograph_slurm.model.gpu import GpuTopology
    from topograph_slurm.model.result import Block, BlockTopology

    nodes = [f"n{i:03d}" for i in range(1, 13)]
    tree = Tree([LeafGroup("leaf1", [], nodes)], [], ["leaf1"])
    racks = BlockTopology([Block(f"rack{r}", nodes[r * 4 : r * 4 + 4]) for r in range(3)], [4])
    fmap = fabric_map(tree, racks)
    bench = plan(fmap, nodes, 4)
    assert [lvl.level for lvl in bench.levels] == ["node", "domain", "leaf"]
    leaf = next(lvl for lvl in bench.levels if lvl.level == "leaf")
    assert leaf.across == "domain"
    assert all(run.uplinks and run.uplinks[0][0] == "domain" for run in leaf.runs)
    nv18 = GpuTopology((0, 1), (), {(0, 1): "NV18"}, {})
    rails = {n: [("4x", "NDR")] * 4 for n in nodes}
    expected = expected_rates(bench, rails, {n: nv18 for n in nodes}, nvlink_domains=True)
    by_level = {run.level: expected[run.key] for run in bench.runs}
    assert by_level == {"node": 450.0, "domain": 450.0, "leaf": 200.0}
