"""Parallel groups against the fabric: the layout's groups, their spans, the node order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topograph_slurm.analysis.placement.explain import PathFacts, explain
from topograph_slurm.analysis.placement.order import best_order, packed_order
from topograph_slurm.analysis.placement.span import (
    cost,
    fabric_map,
    home_level,
    kind_spans,
    rank_nodes,
    span,
)
from topograph_slurm.model.placement import FabricMap, ParallelLayout
from topograph_slurm.model.result import Block, BlockTopology, Finding, LeafGroup, Tree, TreeSwitch


def two_leaf_tree(per_leaf: int = 4, leaves: int = 2) -> Tree:
    """``leaves`` leaves of ``per_leaf`` nodes (n01, n02, …) under one spine."""
    groups = [
        LeafGroup(f"leaf{i + 1}", [], [f"n{i * per_leaf + j + 1:02d}" for j in range(per_leaf)])
        for i in range(leaves)
    ]
    spine = TreeSwitch("spine", 1, [], [g.name for g in groups])
    return Tree(groups, [spine], ["spine"])


def island_tree() -> Tree:
    """Two leaves with no common switch: two islands."""
    return Tree(
        [LeafGroup("a", [], ["a1", "a2"]), LeafGroup("b", [], ["b1", "b2"])], [], ["a", "b"]
    )


def blocks(*members: list[str]) -> BlockTopology:
    return BlockTopology([Block(f"b{i + 1}", nodes) for i, nodes in enumerate(members)], [2])


# --------------------------------------------------------------------------- layouts


def test_megatron_order_puts_tp_innermost_and_pp_outermost() -> None:
    """Megatron-Core's documented example: 8 GPUs, tp=2, pp=2, dp=2, order tp-cp-ep-dp-pp."""
    layout = ParallelLayout.for_world(8, tp=2, pp=2)
    assert layout.dp == 2
    assert layout.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert layout.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert layout.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_another_order_changes_which_ranks_group() -> None:
    layout = ParallelLayout.for_world(8, tp=2, pp=2, order="tp-pp-dp-cp-ep")
    assert layout.groups("pp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert layout.groups("dp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


# --------------------------------------------------------------------------- spans


def test_a_tree_gives_leaf_spine_and_island_levels() -> None:
    fmap = fabric_map(two_leaf_tree())
    assert fmap.levels == ["node", "leaf", "spine-1", "island", "fabric"]
    assert span(fmap, ["n01"]) == "node"
    assert span(fmap, ["n01", "n04"]) == "leaf"
    assert span(fmap, ["n01", "n05"]) == "spine-1"


def test_islands_share_nothing() -> None:
    fmap = fabric_map(island_tree())
    assert span(fmap, ["a1", "a2"]) == "leaf"
    assert span(fmap, ["a1", "b1"]) == "fabric"


def test_blocks_give_a_domain_level_and_unknown_nodes_share_nothing() -> None:
    fmap = fabric_map(None, blocks(["n01", "n02"], ["n03", "n04"]))
    assert fmap.levels == ["node", "domain", "fabric"]
    assert span(fmap, ["n01", "n02"]) == "domain"
    assert span(fmap, ["n01", "n03"]) == "fabric"  # no one block holds them
    assert span(fmap, ["n01", "x9"]) == "fabric"


def test_groups_across_blocks_cross_the_domain_level() -> None:
    fmap = fabric_map(None, blocks(["n01", "n02"], ["n03", "n04"]))
    layout = ParallelLayout.for_world(4 * 4, tp=8)
    split = kind_spans(layout, rank_nodes(["n01", "n03", "n02", "n04"], 4), fmap)["tp"]
    assert split.crossing("domain", fmap.levels) == 2 and split.worst_level == "fabric"
    kept = kind_spans(layout, rank_nodes(["n01", "n02", "n03", "n04"], 4), fmap)["tp"]
    assert kept.crossing("domain", fmap.levels) == 0


@pytest.mark.parametrize(
    ("order", "gpus", "tp", "expected"),
    [
        # tp=16 on 8-GPU nodes: each TP group takes two consecutive nodes of the order
        (["n01", "n02", "n05", "n06"], 8, 16, {"leaf": 2}),
        (["n01", "n05", "n02", "n06"], 8, 16, {"spine-1": 2}),
        # tp=4 on 8-GPU nodes: every TP group inside one node
        (["n01", "n05"], 8, 4, {"node": 4}),
        # tp=8 on 4-GPU nodes across the two leaves
        (["n04", "n05", "n01", "n02"], 4, 8, {"spine-1": 1, "leaf": 1}),
    ],
)
def test_tp_spans_follow_the_node_order(
    order: list[str], gpus: int, tp: int, expected: dict[str, int]
) -> None:
    fmap = fabric_map(two_leaf_tree())
    layout = ParallelLayout.for_world(len(order) * gpus, tp=tp)
    by_level = kind_spans(layout, rank_nodes(order, gpus), fmap)["tp"].by_level
    assert {level: n for level, n in by_level.items() if n} == expected


def test_home_level_is_the_finest_level_that_can_hold_the_group() -> None:
    fmap = fabric_map(two_leaf_tree(per_leaf=4), blocks(["n01", "n02"], ["n03", "n04"]))
    assert home_level(fmap, 1) == "node"
    assert home_level(fmap, 2) == "domain"
    assert home_level(fmap, 3) == "leaf"
    assert home_level(fmap, 5) == "spine-1"


# --------------------------------------------------------------------------- order


def test_order_keeps_tp_inside_blocks_and_pipelines_inside_a_leaf() -> None:
    """Slurm's order interleaves the blocks; the packed order keeps TP inside them."""
    tree = two_leaf_tree(per_leaf=4)
    fmap = fabric_map(tree, blocks(["n01", "n02"], ["n03", "n04"], ["n05", "n06"], ["n07", "n08"]))
    given_order = ["n01", "n03", "n05", "n07", "n02", "n04", "n06", "n08"]
    layout = ParallelLayout.for_world(8 * 8, tp=16, pp=2)
    before = kind_spans(layout, rank_nodes(given_order, 8), fmap)
    assert before["tp"].crossing("domain", fmap.levels) == 4
    ordered = best_order(layout, given_order, 8, fmap)
    assert ordered.chosen == "packed"
    assert ordered.spans["tp"].crossing("domain", fmap.levels) == 0
    assert ordered.spans["pp"].crossing("spine-1", fmap.levels) == 0


def test_nodes_with_findings_come_last_in_their_domain() -> None:
    fmap = fabric_map(two_leaf_tree(per_leaf=4, leaves=1))
    layout = ParallelLayout.for_world(4 * 8, tp=8)
    order = packed_order(layout, ["n01", "n02", "n03", "n04"], 8, fmap, unhealthy={"n01"})
    assert order == ["n02", "n03", "n04", "n01"]


def _domains(counts: list[int]) -> tuple[FabricMap, list[str]]:
    members = []
    for i, count in enumerate(counts):
        members.append([f"d{i}n{j:02d}" for j in range(count)])
    nodes = [node for group in members for node in group]
    return fabric_map(None, blocks(*members)), nodes


@settings(max_examples=150, deadline=None)
@given(
    per_unit=st.sampled_from([1, 2, 4]),
    units=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    pp=st.sampled_from([1, 2]),
    shuffle=st.randoms(use_true_random=False),
)
def test_tp_groups_that_fit_their_domains_never_cross_and_order_never_loses(
    per_unit: int, units: list[int], pp: int, shuffle: object
) -> None:
    """Domains holding whole TP groups: the chosen order crosses none, whatever order Slurm
    gave, and is never worse than Slurm's order on any kind."""
    gpus = 4
    fmap, nodes = _domains([count * per_unit for count in units])
    world = len(nodes) * gpus
    tp = per_unit * gpus
    if world % (tp * pp):
        pp = 1
    layout = ParallelLayout.for_world(world, tp=tp, pp=pp)
    given_order = list(nodes)
    shuffle.shuffle(given_order)  # type: ignore[attr-defined]
    ordered = best_order(layout, given_order, gpus, fmap)
    assert ordered.spans["tp"].crossing("domain", fmap.levels) == 0 if tp > gpus else True
    slurm = kind_spans(layout, rank_nodes(given_order, gpus), fmap)
    assert cost(ordered.spans, fmap.levels) <= cost(slurm, fmap.levels)
    assert sorted(ordered.nodes) == sorted(nodes)


# --------------------------------------------------------------------------- explain


def test_explain_says_which_tp_groups_cross_and_on_what() -> None:
    fmap = fabric_map(two_leaf_tree())
    facts = PathFacts(
        rails={node: [("4x", "NDR")] for node in ("n01", "n02", "n05", "n06")},
        uplinks={"leaf1": [("4x", "NDR"), ("4x", "HDR")]},
        problems={"n05": [Finding("missing-rail", "n05", "rail 3 has no link")]},
    )
    layout = ParallelLayout.for_world(32, tp=16)
    crossing = explain(layout, rank_nodes(["n01", "n05", "n02", "n06"], 8), 8, fmap, facts)
    assert not crossing.tp_inside
    assert crossing.tp_home == "leaf"
    assert crossing.verdict == "2 of 2 TP groups of 16 GPUs cross out of leaf"
    report = crossing.kinds["tp"]
    assert report.spans.worst_level == "spine-1"
    assert report.worst_link == "InfiniBand 4xHDR (200 Gb/s per link)"
    assert [f.subject for f in report.troubles] == ["n05"]
    inside = explain(layout, rank_nodes(["n01", "n02", "n05", "n06"], 8), 8, fmap, facts)
    assert inside.tp_inside
    assert inside.verdict == "all 2 TP groups of 16 GPUs are inside leaf"
    assert inside.kinds["tp"].worst_link == "InfiniBand 4xNDR (400 Gb/s per link)"


def test_explain_of_tp_inside_nodes_and_nvlink_domains() -> None:
    fmap = fabric_map(None, blocks(["g1", "g2"], ["g3", "g4"]))
    facts = PathFacts(nvlink_domains=True)
    layout = ParallelLayout.for_world(16, tp=8, pp=2)
    result = explain(layout, rank_nodes(["g1", "g2", "g3", "g4"], 4), 4, fmap, facts)
    assert result.tp_inside and result.tp_home == "domain"
    assert result.kinds["tp"].worst_link == "NVLink (multi-node domain)"
    small = explain(
        ParallelLayout.for_world(16, tp=4), rank_nodes(["g1", "g2", "g3", "g4"], 4), 4, fmap
    )
    assert small.tp_home == "node" and small.kinds["tp"].worst_link == "NVLink/PCIe inside the node"
