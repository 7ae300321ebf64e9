"""The rail vote of :func:`topology.leaf.group_leaves`: majorities, ties, and leaf switches
that belong to one logical leaf only (so that leaf names stay unique)."""

from __future__ import annotations

import pytest

from tests.conftest import real_fixture
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.leaf import group_leaves
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import LeafGroup
from topograph_slurm.sources.ibnetdiscover.parse import read_ibnetdiscover

Rails = dict[str, list[tuple[str, str]]]


def _units(units: int, nodes: int, rails: int) -> Rails:
    """Unit u's node n has HCA ``h-u-n-r`` on leaf ``su{u}-r{r}`` (switch GUID = its name)."""
    return {
        f"gpu{u}{n}": [(f"h-{u}-{n}-{r}", f"su{u}-r{r}") for r in range(rails)]
        for u in range(units)
        for n in range(nodes)
    }


def _move(rails: Rails, node: str, rail: int, leaf: str) -> None:
    hca, _ = rails[node][rail]
    rails[node][rail] = (hca, leaf)


def _group(rails: Rails) -> tuple[dict[str, list[str]], list[LeafGroup], list[str]]:
    groups, findings = group_leaves(rails, {})
    assert all(f.kind == FindingKind.RAIL_DISAGREEMENT for f in findings)
    return {g.name: g.nodes for g in groups}, groups, [f.message for f in findings]


def _assert_partition(rails: Rails, groups: list[LeafGroup]) -> None:
    """Every node in exactly one group, every leaf switch in exactly one, names unique."""
    nodes = [node for group in groups for node in group.nodes]
    switches = [leaf for group in groups for leaf in group.switches]
    assert sorted(nodes) == sorted(rails)
    assert len(switches) == len(set(switches))
    assert len({group.name for group in groups}) == len(groups)


def test_two_rails_split_one_to_one_stay_with_the_first_rail_and_names_stay_unique() -> None:
    rails = _units(units=2, nodes=4, rails=2)
    _move(rails, "gpu02", 1, "su1-r1")  # the reported bug: a 1:1 vote, no majority
    leaves, groups, messages = _group(rails)
    assert leaves == {
        "su0-r0": ["gpu00", "gpu01", "gpu02", "gpu03"],
        "su1-r0": ["gpu10", "gpu11", "gpu12", "gpu13"],
    }
    _assert_partition(rails, groups)
    assert messages == [
        "rails reach 2 leaf groups (leaves su0-r0, su1-r1); no majority (1 of 2 rails in each "
        "of the top groups): placed with the group of its first rail (HCA h-0-2-0 on su0-r0)"
    ]


def test_a_tie_follows_the_first_rail_whichever_unit_it_is_on() -> None:
    rails = _units(units=2, nodes=4, rails=2)
    _move(rails, "gpu02", 0, "su1-r0")  # now the first rail is the moved one
    leaves, groups, _ = _group(rails)
    assert leaves["su1-r0"] == ["gpu02", "gpu10", "gpu11", "gpu12", "gpu13"]
    assert leaves["su0-r0"] == ["gpu00", "gpu01", "gpu03"]
    _assert_partition(rails, groups)


@pytest.mark.parametrize(
    ("units", "rails", "node", "moves", "placed", "told"),
    [  # a 2:2 tie of four rails; a three-way 1:1:1 tie of three
        (2, 4, "gpu10", {0: "su0-r0", 1: "su0-r1"}, "su0-r0", "no majority (2 of 4 rails"),
        (3, 3, "gpu11", {0: "su2-r0", 2: "su0-r2"}, "su2-r0", "rails reach 3 leaf groups"),
    ],
)
def test_any_tie_follows_the_first_rail(
    units: int, rails: int, node: str, moves: dict[int, str], placed: str, told: str
) -> None:
    cabled = _units(units=units, nodes=4, rails=rails)
    for rail, leaf in moves.items():
        _move(cabled, node, rail, leaf)
    leaves, groups, messages = _group(cabled)
    assert node in leaves[placed]
    _assert_partition(cabled, groups)
    assert told in messages[0]


def test_a_majority_keeps_the_node_and_its_group_keeps_its_own_name() -> None:
    rails = _units(units=2, nodes=4, rails=4)
    # a unit-1 node's last rail on unit 0's leaf, whose name sorts before unit 1's leaves:
    # the group once took that leaf in and was named after it
    _move(rails, "gpu12", 3, "su0-r3")
    leaves, groups, messages = _group(rails)
    assert leaves["su1-r0"] == ["gpu10", "gpu11", "gpu12", "gpu13"]
    assert {g.name: g.switches for g in groups}["su1-r0"] == [f"su1-r{r}" for r in range(4)]
    _assert_partition(rails, groups)
    assert messages[0].endswith("placed with the group holding 3 of 4 rails")


def test_a_leaf_only_moved_cables_reach_joins_one_group() -> None:
    rails = _units(units=2, nodes=4, rails=4)
    _move(rails, "gpu01", 3, "spare")  # a leaf switch no unit's signature claims
    _move(rails, "gpu11", 3, "spare")
    leaves, groups, _ = _group(rails)
    _assert_partition(rails, groups)
    # the first node placed (gpu01) takes it; first by name, it names that group
    assert leaves == {
        "spare": ["gpu00", "gpu01", "gpu02", "gpu03"],
        "su1-r0": ["gpu10", "gpu11", "gpu12", "gpu13"],
    }


def test_a_real_fabric_s_dual_homed_hosts_tie_and_no_leaf_switch_is_shared() -> None:
    """sat11 (a real HDR capture): two UFM hosts have one HCA on each of two leaves, a 1:1 vote.
    Each once pulled the other leaf into its group, so one switch sat in two logical leaves."""
    fabric = read_ibnetdiscover(
        real_fixture("ibnetdiscover/mellanox-sat11-hdr-putty-log-notabs.txt")
    )
    analysis = analyse(fabric, NamingPolicy())
    leaves = analysis.tree.leaves
    _assert_partition(analysis.hosts.rails, leaves)
    ties = {
        f.subject: f.message for f in analysis.findings if f.kind == FindingKind.RAIL_DISAGREEMENT
    }
    assert sorted(ties) == ["sat11-0101-0902-01ufm", "sat11-0101-0902-02ufm"]
    assert all("no majority (1 of 2 rails" in message for message in ties.values())
    placed = {node: leaf.name for leaf in leaves for node in leaf.nodes}
    assert placed["sat11-0101-0902-02ufm"] == "sat11-0101-0902-01ib0"  # its first rail's leaf


def test_a_unit_folded_in_through_another_units_moved_rail_is_reported() -> None:
    """Unit 0's rail 3 all cabled to unit 1's rail-3 leaf: unit 1's nodes share only that leaf
    with unit 0's and are folded into its logical leaf, which no vote shows. Each of them is
    reported; a node that brings one leaf of four along (a spare leaf) is not."""
    rails = _units(units=2, nodes=4, rails=4)
    for node in ("gpu00", "gpu01", "gpu02", "gpu03"):
        _move(rails, node, 3, "su1-r3")
    leaves, groups, _ = _group(rails)
    _assert_partition(rails, groups)
    assert leaves == {
        "su0-r0": ["gpu00", "gpu01", "gpu02", "gpu03", "gpu10", "gpu11", "gpu12", "gpu13"]
    }
    findings = group_leaves(rails, {})[1]
    assert [f.subject for f in findings] == ["gpu10", "gpu11", "gpu12", "gpu13"]
    assert findings[0].message.startswith(
        "rails share only 1 of 4 leaves with leaf group su0-r0 (su1-r3); its other leaves "
        "(su1-r0, su1-r1, su1-r2) were folded into that group"
    )
    spare = _units(units=2, nodes=4, rails=4)
    _move(spare, "gpu01", 3, "spare")
    assert group_leaves(spare, {})[1] == []
