"""Logical leaves and the switch tree on hand-built fabrics."""

from __future__ import annotations

from tests.support.fabric_builder import FabricBuilder
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.model.fabric import Links
from topograph_slurm.model.findings import FindingKind


def _rail_fabric(units: int = 2, nodes: int = 4, rails: int = 2, spines: int = 2) -> FabricBuilder:
    """A rail-optimised 2-tier fabric: unit u has leaves su{u}-r{r}, node n under each rail."""
    fb = FabricBuilder()
    for s in range(spines):
        fb.switch(f"spine{s}")
    for u in range(units):
        for r in range(rails):
            leaf = f"su{u}-r{r}"
            fb.switch(leaf)
            for s in range(spines):
                fb.cable(leaf, f"spine{s}")
        for n in range(nodes):
            fb.host(f"gpu{u}{n}", [f"su{u}-r{r}" for r in range(rails)])
    return fb


def test_rails_fold_into_one_logical_leaf_per_unit_under_one_spine() -> None:
    analysis = analyse(_rail_fabric().fabric, NamingPolicy())
    leaves = {leaf.name: leaf.nodes for leaf in analysis.tree.leaves}
    assert leaves == {
        "su0-r0": ["gpu00", "gpu01", "gpu02", "gpu03"],
        "su1-r0": ["gpu10", "gpu11", "gpu12", "gpu13"],
    }
    (spine,) = analysis.tree.uppers
    assert (spine.name, spine.level, spine.children) == ("spine0", 1, ["su0-r0", "su1-r0"])
    assert len(spine.switches) == 2
    assert analysis.tree.tops == ["spine0"]
    assert analysis.findings == []


def test_moved_cable_is_a_finding_and_node_stays_with_its_majority() -> None:
    fb = _rail_fabric(rails=4)
    # move gpu02's rail-3 cable to unit 1's rail-3 leaf
    guid = fb.guids["gpu02/3"]
    fb.fabric.links = Links.of(
        link for link in fb.fabric.links if guid not in (link.a_guid, link.b_guid)
    )
    fb.cable("gpu02/3", "su1-r3")
    analysis = analyse(fb.fabric, NamingPolicy())
    leaves = {leaf.name: leaf.nodes for leaf in analysis.tree.leaves}
    assert leaves["su0-r0"] == ["gpu00", "gpu01", "gpu02", "gpu03"]
    assert leaves["su1-r0"] == ["gpu10", "gpu11", "gpu12", "gpu13"]
    (finding,) = [f for f in analysis.findings if f.kind == FindingKind.RAIL_DISAGREEMENT]
    assert finding.subject == "gpu02"
    assert "3 of 4 rails" in finding.message


def test_lost_rail_is_a_missing_rail_finding() -> None:
    fb = _rail_fabric(rails=4)
    guid = fb.guids["gpu11/2"]
    fb.fabric.links = Links.of(
        link for link in fb.fabric.links if guid not in (link.a_guid, link.b_guid)
    )
    analysis = analyse(fb.fabric, NamingPolicy())
    assert [(f.kind, f.subject) for f in analysis.findings] == [("missing-rail", "gpu11")]
    assert "gpu11" in analysis.tree.leaves[1].nodes


def test_three_tiers_pods_under_core() -> None:
    fb = FabricBuilder()
    fb.switch("core0")
    fb.switch("core1")
    for p in range(2):
        for s in range(2):
            spine = f"pod{p}-spine{s}"
            fb.switch(spine)
            fb.cable(spine, "core0")
            fb.cable(spine, "core1")
        for u in range(2):
            leaf = f"pod{p}-leaf{u}"
            fb.switch(leaf)
            for s in range(2):
                fb.cable(leaf, f"pod{p}-spine{s}")
            fb.host(f"n{p}{u}", [leaf])
    tree = analyse(fb.fabric, NamingPolicy()).tree
    levels = {(s.name, s.level): s.children for s in tree.uppers}
    assert levels == {
        ("pod0-spine0", 1): ["pod0-leaf0", "pod0-leaf1"],
        ("pod1-spine0", 1): ["pod1-leaf0", "pod1-leaf1"],
        ("core0", 2): ["pod0-spine0", "pod1-spine0"],
    }
    assert tree.tops == ["core0"] and tree.depth == 3
    capped = analyse(fb.fabric, NamingPolicy(), max_tiers=2).tree
    assert {s.name for s in capped.uppers} == {"pod0-spine0", "pod1-spine0"}
    assert capped.tops == ["pod0-spine0", "pod1-spine0"]


def test_islands_stay_separate_and_lateral_leaves_get_a_top() -> None:
    fb = FabricBuilder()
    for name in ("a1", "a2", "b1"):
        fb.switch(name)
        fb.host(f"h{name}", [name])
    fb.cable("a1", "a2")  # lateral link: one island without a spine
    tree = analyse(fb.fabric, NamingPolicy()).tree
    assert tree.tops == ["b1", "top"]
    (top,) = tree.uppers
    assert top.children == ["a1", "a2"] and top.switches == []


def test_service_leaf_above_spines_is_not_a_parent() -> None:
    fb = _rail_fabric(rails=1)
    fb.switch("svc-leaf")
    fb.cable("svc-leaf", "spine0")
    fb.ca("ufm", "ufm01 mlx5_0")
    fb.cable("ufm", "svc-leaf")
    analysis = analyse(fb.fabric, NamingPolicy(slurm_nodes=None))
    names = {s.name for s in analysis.tree.uppers}
    assert "svc-leaf" not in names
    assert analysis.tree.tops == ["spine0"]


def test_spines_with_only_sharp_nodes_still_parents() -> None:
    fb = _rail_fabric(rails=1)
    fb.ca("an", "Mellanox Technologies Aggregation Node")
    fb.cable("an", "spine0")
    assert analyse(fb.fabric, NamingPolicy()).tree.tops == ["spine0"]


def test_degraded_link_is_reported() -> None:
    fb = _rail_fabric(rails=1)
    fb.cable("su0-r0", "spine1", width="1x")
    analysis = analyse(fb.fabric, NamingPolicy())
    degraded = [f for f in analysis.findings if f.kind == "degraded-link"]
    assert len(degraded) == 1
    assert "1xNDR" in degraded[0].message and "4xNDR" in degraded[0].message
