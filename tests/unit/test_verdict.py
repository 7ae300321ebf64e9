"""Per-node health verdicts: every finding kind's severity (from the catalogue), the nodes
behind a slow uplink or HCA cable, and the labels (leaf, block) a node carries."""

from __future__ import annotations

import pytest

from tests.support.fabric_builder import FabricBuilder
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.analysis.health.verdict import judge, node_labels, severity
from topograph_slurm.model.fabric import Link, Links
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.health import DEGRADED, DRAIN, HEALTHY, NodeLabels
from topograph_slurm.model.result import LEVEL_INFO, LEVEL_PROBLEM, Block, BlockTopology, Finding


@pytest.mark.parametrize("kind", list(FindingKind))
@pytest.mark.parametrize("level", [LEVEL_PROBLEM, LEVEL_INFO])
def test_every_kind_has_the_catalogues_severity_at_either_level(
    kind: FindingKind, level: str
) -> None:
    finding = Finding(kind, "n1", "m", level)
    verdicts, unused = judge([finding], ["n1", "n2"])
    assert severity(finding) == kind.severity
    assert verdicts["n1"].severity == (kind.severity or HEALTHY)
    assert verdicts["n2"].severity == HEALTHY
    assert unused == ([(finding, kind.ignored)] if kind.severity is None else [])


def test_an_unknown_problem_kind_degrades_and_unknown_information_is_ignored() -> None:
    verdicts, unused = judge(
        [Finding("new-kind", "n1", "m"), Finding("new-note", "n2", "m", LEVEL_INFO)], ["n1", "n2"]
    )
    assert verdicts["n1"].severity == DEGRADED
    assert verdicts["n2"].severity == HEALTHY
    assert [(f.kind, why) for f, why in unused] == [("new-note", "information, not a problem")]


def test_worst_finding_wins_and_every_cause_is_kept() -> None:
    found = [
        Finding(FindingKind.DEGRADED_LINK, "n1 mlx5_0/1 <-> leaf/1", "slow", nodes=("n1",)),
        Finding(FindingKind.MISSING_RAIL, "n1", "lost one"),
        Finding(FindingKind.COLLECT_FAILED, "n2", "unreachable"),
        Finding(FindingKind.RAIL_DISAGREEMENT, "n2", "moved"),
    ]
    verdicts, _ = judge(found, ["n1", "n2", "n3"])
    assert verdicts["n1"].severity == DRAIN
    assert verdicts["n1"].kinds == ["degraded-link", "missing-rail"]
    assert verdicts["n2"].severity == DEGRADED  # known to be slow beats not read
    assert verdicts["n3"].findings == ()


def test_a_finding_naming_no_judged_node_is_listed_with_the_reason() -> None:
    verdicts, unused = judge(
        [Finding(FindingKind.DEGRADED_LINK, "spine/1 <-> core/1", "slow")], ["n1"]
    )
    assert verdicts["n1"].severity == HEALTHY
    ((finding, why),) = unused
    assert finding.subject == "spine/1 <-> core/1" and "not a node" in why


def test_a_finding_naming_a_node_the_fabric_does_not_show_changes_nothing() -> None:
    """A bench record's slow-link naming n9, which this fabric does not show: no verdict for
    n9 (it would get Weight and a feature), the finding listed unused saying why."""
    finding = Finding(FindingKind.SLOW_LINK, "leaf1", "slow", nodes=("n9",))
    verdicts, unused = judge([finding], ["n1"])
    assert list(verdicts) == ["n1"] and verdicts["n1"].severity == HEALTHY
    assert unused == [(finding, "n9: not a node this run judges")]
    # one node it shows of two it names: that one only
    verdicts, _ = judge([Finding(FindingKind.SLOW_LINK, "l", "slow", nodes=("n1", "n9"))], ["n1"])
    assert list(verdicts) == ["n1"] and verdicts["n1"].severity == DEGRADED


@pytest.mark.parametrize(
    "description",
    ["MT4123 ConnectX6   Mellanox Technologies", "storage01 mlx5_0", ""],
)
def test_a_slow_cable_of_a_host_that_is_no_slurm_node_degrades_nobody(description: str) -> None:
    """A degraded cable between leafA and an HCA that is not a Slurm node (firmware-default
    description, a storage host Slurm does not list, none at all) slows that host only: no
    node of leafA is degraded."""
    fb = _two_leaves()
    fb.ca("other", description)
    fb.cable("other", "leafA")
    _slow(fb, "other", "leafA")
    listed = frozenset(f"{leaf}{n}" for leaf in "ab" for n in range(3))
    analysis = analyse(fb.fabric, NamingPolicy(slurm_nodes=listed))
    (slow,) = [f for f in analysis.findings if f.kind == FindingKind.DEGRADED_LINK]
    assert slow.nodes == ()
    verdicts, _ = judge(analysis.findings, analysis.hosts.nodes)
    assert all(v.severity == HEALTHY for v in verdicts.values())


def _two_leaves(spines: int = 1) -> FabricBuilder:
    fb = FabricBuilder()
    for s in range(spines):
        fb.switch(f"spine{s}")
    for name in ("leafA", "leafB"):
        fb.switch(name)
        for s in range(spines):
            fb.cable(name, f"spine{s}")
    for n in range(3):
        fb.host(f"a{n}", ["leafA"])
        fb.host(f"b{n}", ["leafB"])
    return fb


def _slow(fb: FabricBuilder, a: str, b: str) -> None:
    """Retrain the cable between devices *a* and *b* to 1x."""
    ga, gb = fb.guids[a], fb.guids[b]
    fb.fabric.links = Links.of(
        Link.between(x.a_guid, x.a_port, x.b_guid, x.b_port, "1x", x.speed)
        if {x.a_guid, x.b_guid} == {ga, gb}
        else x
        for x in fb.fabric.links
    )


def test_a_slow_leaf_uplink_degrades_every_node_under_that_leaf() -> None:
    fb = _two_leaves(spines=1)
    fb.cable("leafA", "spine0")  # a second uplink, so the slow one is not the norm
    fb.cable("leafB", "spine0")
    _slow(fb, "leafA", "spine0")
    analysis = analyse(fb.fabric, NamingPolicy())
    slow = [f for f in analysis.findings if f.kind == FindingKind.DEGRADED_LINK]
    assert slow and all(f.nodes == ("a0", "a1", "a2") for f in slow)
    verdicts, _ = judge(analysis.findings, analysis.hosts.nodes)
    assert [v.node for v in verdicts.values() if v.severity == DEGRADED] == ["a0", "a1", "a2"]


def test_a_slow_hca_cable_degrades_only_its_node() -> None:
    fb = _two_leaves()
    _slow(fb, "b1/0", "leafB")
    analysis = analyse(fb.fabric, NamingPolicy())
    (slow,) = [f for f in analysis.findings if f.kind == FindingKind.DEGRADED_LINK]
    assert slow.nodes == ("b1",)
    verdicts, _ = judge(analysis.findings, analysis.hosts.nodes)
    assert {n: v.severity for n, v in verdicts.items() if v.severity != HEALTHY} == {"b1": DEGRADED}


def test_labels_name_each_nodes_leaf_and_block() -> None:
    analysis = analyse(_two_leaves().fabric, NamingPolicy())
    blocks = BlockTopology([Block("nvl-a0", ["a0", "a1"]), Block("nvl-b0", ["b0"])], [1])
    labels = node_labels(analysis, blocks)
    assert labels["a0"] == NodeLabels("leafA", "nvl-a0")
    assert labels["a2"] == NodeLabels("leafA", "")
    assert labels["b0"] == NodeLabels("leafB", "nvl-b0")
    assert sorted(labels) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert node_labels(analysis, None)["b2"] == NodeLabels("leafB", "")
