"""Whole topologies read back for ``explain --topology FILE``: tree and block topology.conf,
topology.yaml (named or not), through the same line handling as the layout reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from topograph_slurm.analysis.placement.span import fabric_map
from topograph_slurm.errors import InputError
from topograph_slurm.sources.layout import count_nodes, load_topology, parse_topology

TREE_CONF = """# generated
switchname=leaf1 Nodes=gpu[01-02]
SwitchName=leaf2 \\
  Nodes=gpu[03-04]   # continuation and a comment
SwitchName=leaf3 Nodes=gpu[05-06]
SwitchName=spine1 Switches=leaf[1-2]
SwitchName=spine2 Switches=leaf3
SwitchName=core Switches=spine[1-2]
"""

YAML = """
- topology: ib
  cluster_default: true
  tree:
    switches:
      - switch: leaf1
        nodes: gpu[01-02]
      - switch: leaf2
        nodes: gpu[03-04]
      - switch: top
        children: leaf[1-2]
- topology: nvl
  block:
    block_sizes: [2, 4]
    blocks:
      - block: nvl1
        nodes: gpu[01-02]
      - block: nvl2
        nodes: gpu[03-04]
- topology: none
  flat: true
"""


def test_tree_conf_levels_parents_and_tops() -> None:
    tree = parse_topology(TREE_CONF).tree
    assert tree is not None
    assert [(g.name, g.nodes) for g in tree.leaves] == [
        ("leaf1", ["gpu01", "gpu02"]),
        ("leaf2", ["gpu03", "gpu04"]),
        ("leaf3", ["gpu05", "gpu06"]),
    ]
    assert [(s.name, s.level, s.children) for s in tree.uppers] == [
        ("spine1", 1, ["leaf1", "leaf2"]),
        ("spine2", 1, ["leaf3"]),
        ("core", 2, ["spine1", "spine2"]),
    ]
    assert tree.tops == ["core"] and tree.depth == 3
    fmap = fabric_map(tree, None)
    assert fmap.levels == ["node", "leaf", "spine-1", "spine-2", "island", "fabric"]
    assert count_nodes(TREE_CONF) == 6


def test_tree_without_a_top_switch_is_islands() -> None:
    tree = parse_topology("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[3-4]\n").tree
    assert tree is not None and tree.tops == ["a", "b"] and tree.uppers == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SwitchName=top Switches=leaf9\nSwitchName=x Nodes=n1\n", "unknown switch 'leaf9'"),
        ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "contain each other"),
        ("SwitchName=a;b Nodes=n1\n", "invalid switch name"),
        ("SwitchName=a Nodes=n[1-\n", "topology.conf"),
    ],
)
def test_bad_tree_conf_is_one_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_topology(text, "topology.conf")


def test_block_conf_sizes_and_default_base() -> None:
    blocks = parse_topology("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-6]\n").blocks
    assert blocks is not None and blocks.block_sizes == [2]  # no BlockSizes: the smallest
    sized = parse_topology("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,8\n").blocks
    assert sized is not None and sized.block_sizes == [4, 8]


def test_yaml_without_a_name_gives_the_tree_and_the_blocks() -> None:
    both = parse_topology(YAML)
    assert both.tree is not None and [g.name for g in both.tree.leaves] == ["leaf1", "leaf2"]
    assert both.blocks is not None and both.blocks.block_sizes == [2, 4]
    fmap = fabric_map(both.tree, both.blocks)
    assert fmap.levels == ["node", "domain", "leaf", "spine-1", "island", "fabric"]


def test_yaml_named_topologies() -> None:
    ib, nvl, none = (parse_topology(YAML, topology=name) for name in ("ib", "nvl", "none"))
    assert (ib.kind, nvl.kind, none.kind) == ("tree", "block", "flat")
    assert ib.blocks is None and nvl.tree is None and ib.name == "ib"
    with pytest.raises(InputError, match="no topology named 'other'"):
        parse_topology(YAML, "topology.yaml", topology="other")


def test_yaml_switch_without_a_name_is_an_input_error() -> None:
    bad = "- topology: ib\n  tree:\n    switches:\n      - nodes: n1\n"
    with pytest.raises(InputError, match="every switch needs a 'switch' name"):
        parse_topology(bad, "topology.yaml")


def test_load_topology_reads_a_file_and_refuses_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "topology.conf"
    path.write_text(TREE_CONF, encoding="utf-8")
    assert load_topology(path).kind == "tree"
    with pytest.raises(InputError, match="cannot read topology"):
        load_topology(tmp_path / "absent.conf")
