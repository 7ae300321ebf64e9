"""Config-only validation: slurmctld alone reads a hand-written topology, and
``scontrol show topology`` parsed back equals what was written. Also pins the version
differences and the log lines the generator's tests will rely on."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from harness import ValidationResult, parse_show_topology

pytestmark = pytest.mark.integration

Validate = Callable[..., ValidationResult]
NODES = [f"gpu{i:03d}" for i in range(1, 13)]

TREE = """\
SwitchName=leaf1 Nodes=gpu[001-004]
SwitchName=leaf2 Nodes=gpu[005-008]
SwitchName=leaf3 Nodes=gpu[009-012]
SwitchName=spine1 Switches=leaf[1-2]
SwitchName=spine2 Switches=leaf3
SwitchName=core Switches=spine[1-2]
"""

BLOCKS = """\
BlockName=nvl1 Nodes=gpu[001-004]
BlockName=nvl2 Nodes=gpu[005-008]
BlockName=nvl3 Nodes=gpu[009-012]
BlockSizes=4,8
"""


def gpus(first: int, last: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(first, last + 1)]


def test_tree_round_trip(validate: Validate) -> None:
    result = validate(NODES, topology_conf=TREE)
    assert result.started
    assert result.problems == [], result.log_text
    topo = result.topology
    assert {s.name: (s.level, s.nodes) for s in topo.leaves} == {
        "leaf1": (0, gpus(1, 4)),
        "leaf2": (0, gpus(5, 8)),
        "leaf3": (0, gpus(9, 12)),
    }
    assert topo.parent_of() == {
        "leaf1": "spine1",
        "leaf2": "spine1",
        "leaf3": "spine2",
        "spine1": "core",
        "spine2": "core",
    }
    assert topo.nodes_in_several() == set()
    assert sorted(topo.switch("spine1").switches) == ["leaf1", "leaf2"]
    assert topo.switch("spine2").switches == ["leaf3"]
    core = topo.switch("core")
    assert (core.level, sorted(core.switches), core.nodes) == (2, ["spine1", "spine2"], NODES)


def test_block_round_trip(validate: Validate) -> None:
    result = validate(NODES, topology_conf=BLOCKS)
    assert result.started
    assert result.problems == [], result.log_text
    base = result.topology.base_blocks
    assert [(b.name, b.index, b.nodes, b.size) for b in base] == [
        ("nvl1", 0, gpus(1, 4), 4),
        ("nvl2", 1, gpus(5, 8), 4),
        ("nvl3", 2, gpus(9, 12), 4),
    ]
    # Both versions also list the aggregates of the BlockSizes levels, in file order: 1+2.
    aggregates = [b for b in result.topology.blocks if b.aggregated]
    assert [(b.name, b.nodes, b.size) for b in aggregates] == [("nvl[1-2]", gpus(1, 8), 8)]
    assert result.topology.nodes_in_several() == set()


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (
            "SwitchName=l1 Nodes=gpu[001-007]\nSwitchName=l2 Nodes=gpu[007-012]\n"
            "SwitchName=top Switches=l[1-2]\n",
            "Multiple leaf switches contain nodes: gpu007",
        ),
        (
            "SwitchName=l1 Nodes=gpu[001-006]\nSwitchName=l2 Nodes=gpu[007-011]\n"
            "SwitchName=top Switches=l[1-2]\n",
            "switches lack access to 1 nodes: gpu012",
        ),
        (
            "SwitchName=l1 Nodes=gpu[001-006]\nSwitchName=l2 Nodes=gpu[007-013]\n"
            "SwitchName=top Switches=l[1-2]\n",
            "Invalid hostnames in switch configuration: gpu013",
        ),
        (
            "SwitchName=l1 Nodes=gpu[001-006]\nSwitchName=l2 Nodes=gpu[007-012]\n",
            "no switch can reach all nodes",
        ),
    ],
    ids=["node-under-two-leaves", "node-missing", "unknown-node", "islands"],
)
def test_tree_problems_are_reported(validate: Validate, conf: str, message: str) -> None:
    result = validate(NODES, topology_conf=conf)
    assert result.started
    assert any(message in line for line in result.problems), result.problems


def test_block_smaller_than_base(validate: Validate, slurm_version: str) -> None:
    conf = "BlockName=b1 Nodes=gpu[001-004]\nBlockName=b2 Nodes=gpu[005-007]\nBlockSizes=4\n"
    result = validate(gpus(1, 7), topology_conf=conf, check=False)
    if slurm_version == "24.11":  # every block needs >= base size nodes, else fatal
        assert not result.started
        assert "children count lower than bblock_node_cnt" in result.log_text
    else:  # 25.05+ allow smaller blocks
        assert result.started, result.log_text
        assert result.problems == [], result.problems
        assert result.topology.block("b2").nodes == gpus(5, 7)


TOPOLOGY_YAML = """\
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: core
        children: leaf[1-2]
      - switch: leaf1
        nodes: gpu[001-006]
      - switch: leaf2
        nodes: gpu[007-012]
- topology: nvl
  cluster_default: false
  block:
    block_sizes: [4]
    blocks:
      - block: nvl1
        nodes: gpu[001-004]
      - block: nvl2
        nodes: gpu[005-008]
      - block: nvl3
        nodes: gpu[009-012]
"""


def test_topology_yaml_named_topologies(validate: Validate, slurm_version: str) -> None:
    if slurm_version == "24.11":
        pytest.skip("topology.yaml is read by Slurm 25.05 and later only")
    from harness import PartitionSpec

    parts = [PartitionSpec("batch", default=True), PartitionSpec("nvl", options="Topology=nvl")]
    result = validate(NODES, topology_yaml=TOPOLOGY_YAML, partitions=parts)
    assert result.problems == [], result.log_text
    assert [s.name for s in result.topology.leaves] == ["leaf1", "leaf2"]
    assert result.named("fabric").switch("core").nodes == NODES
    assert [b.nodes for b in result.named("nvl").base_blocks] == [
        gpus(1, 4),
        gpus(5, 8),
        gpus(9, 12),
    ]


# -- parser only (no Docker): the formats seen on 24.11.5 and 26.05.5 ------------------------


def test_parse_tree_and_block_lines() -> None:
    text = (
        "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[1-2]\n"
        "SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-2] Switches=s1\n"
        "BlockName=b1 BlockIndex=0 Nodes=n[1-2] BlockSize=4\n"
        "AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-4] BlockSize=8\n"
    )
    topo = parse_show_topology(text)
    assert [s.name for s in topo.leaves] == ["s1"]
    assert topo.switch("top").switches == ["s1"]
    assert topo.switch("s1").switches == []
    assert [(b.name, b.size, b.aggregated) for b in topo.blocks] == [
        ("b1", 4, False),
        ("b[1-2]", 8, True),
    ]
    assert topo.block("b[1-2]").nodes == ["n1", "n2", "n3", "n4"]
    assert topo.leaf_nodes() == {"s1": ["n1", "n2"]}
    assert topo.block_nodes() == {"b1": ["n1", "n2"]}
    assert topo.nodes_in_several() == set()  # leaves and blocks are counted apart
    two_leaves = parse_show_topology(text + "SwitchName=s2 Level=0 LinkSpeed=1 Nodes=n2\n")
    assert two_leaves.nodes_in_several() == {"n2"}
    assert topo.other == []
