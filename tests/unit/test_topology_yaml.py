"""topology.yaml rendering: parsed back with PyYAML and checked against Slurm's schema
(topology.yaml(5)), plus the checks Slurm itself does not make and the partition lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from topograph_slurm.errors import ConfigError
from topograph_slurm.model.result import (
    Block,
    BlockTopology,
    LeafGroup,
    NamedTopology,
    Partition,
    Tree,
    TreeSwitch,
)
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import environment
from topograph_slurm.render.topology_yaml import (
    check_names,
    check_topologies,
    default_partitions,
    partitions_from_map,
    render_partition_lines,
    render_topology_yaml,
)
from topograph_slurm.sources.layout import count_nodes, parse_layout

ENV = environment()
TOPOLOGY_KEYS = {"topology", "cluster_default", "tree", "block", "flat"}


def tree() -> Tree:
    leaves = [
        LeafGroup("leaf1", ["a"], ["gb01", "gb02", "gb03", "gb04"]),
        LeafGroup("leaf2", ["b"], ["gb05", "gb06", "gb07", "gb08"]),
    ]
    return Tree(leaves, [TreeSwitch("spine1", 1, ["c"], ["leaf1", "leaf2"])], ["spine1"])


def blocks(empty: bool = False) -> BlockTopology:
    middle = Block("nvl-gb05", [] if empty else ["gb05", "gb06", "gb07", "gb08"])
    return BlockTopology(
        [
            Block("nvl-gb01", ["gb01", "gb02", "gb03", "gb04"]),
            middle,
            Block("nvl-gb09", ["gb09", "gb10", "gb11", "gb12"]),
        ],
        [4, 8],
    )


def three(empty: bool = False) -> list[NamedTopology]:
    return [
        NamedTopology("ib", tree=tree()),
        NamedTopology("nvl", blocks=blocks(empty)),
        NamedTopology("flat"),
    ]


def parsed(text: str) -> list[dict[str, Any]]:
    data = yaml.safe_load(text)
    assert isinstance(data, list)
    return data


def test_schema_of_all_three_topologies() -> None:
    text = render_topology_yaml(ENV, three(), "nvl", SlurmVersion(26, 5))
    data = parsed(text)
    assert [t["topology"] for t in data] == ["ib", "nvl", "flat"]
    for entry in data:
        assert set(entry) <= TOPOLOGY_KEYS
        assert next(iter(entry)) == "topology"  # "Must be the first attribute"
        assert len(set(entry) & {"tree", "block", "flat"}) == 1  # exactly one type
        assert isinstance(entry["cluster_default"], bool)
    assert [t["cluster_default"] for t in data] == [False, True, False]
    ib, nvl, flat = data
    assert ib["tree"]["switches"] == [
        {"switch": "leaf1", "nodes": "gb[01-04]"},
        {"switch": "leaf2", "nodes": "gb[05-08]"},
        {"switch": "spine1", "children": "leaf1,leaf2"},
    ]
    assert nvl["block"]["block_sizes"] == [4, 8]
    assert nvl["block"]["blocks"] == [
        {"block": "nvl-gb01", "nodes": "gb[01-04]"},
        {"block": "nvl-gb05", "nodes": "gb[05-08]"},
        {"block": "nvl-gb09", "nodes": "gb[09-12]"},
    ]
    assert flat["flat"] is True


def test_empty_block_has_no_nodes_key_and_keeps_its_position() -> None:
    data = parsed(render_topology_yaml(ENV, three(empty=True), "ib"))
    assert data[1]["block"]["blocks"][1] == {"block": "nvl-gb05"}
    assert [
        b.name for b in parse_layout(render_topology_yaml(ENV, three(True), "ib"), topology="nvl")
    ] == ["nvl-gb01", "nvl-gb05", "nvl-gb09"]


def test_rendering_is_deterministic_and_counted_by_the_writer() -> None:
    one = render_topology_yaml(ENV, three(), "ib")
    assert one == render_topology_yaml(ENV, three(), "ib")
    assert count_nodes(one) == 12  # output.py's shrink guard reads topology.yaml too


def test_names_that_need_quoting_survive() -> None:
    topo = BlockTopology([Block("b.1_x-y", ["n1"]), Block("2", ["n2"])], [1, 2])
    data = parsed(render_topology_yaml(ENV, [NamedTopology("t", blocks=topo)], "t"))
    assert [b["block"] for b in data[0]["block"]["blocks"]] == ["b.1_x-y", "2"]  # "2" stays text


def test_topology_yaml_needs_25_05() -> None:
    with pytest.raises(ConfigError, match=r"25\.05"):
        render_topology_yaml(ENV, three(), "ib", SlurmVersion(24, 11))


@pytest.mark.parametrize(
    ("topologies", "default", "message"),
    [
        ([], "x", "at least one"),
        ([NamedTopology("a"), NamedTopology("a")], "a", "duplicate topology"),
        ([NamedTopology("a")], "b", "default topology 'b'"),
        ([NamedTopology("bad name")], "bad name", "invalid topology name"),
        ([NamedTopology("t", tree=Tree([], [], []))], "t", "no leaf switch"),
        (
            [NamedTopology("t", blocks=BlockTopology([Block("b", ["n1"])], [1, 3]))],
            "t",
            "power of two",
        ),
        (
            [NamedTopology("t", blocks=BlockTopology([Block("b", ["n1"])], [1, 2]))],
            "t",
            "needs 2 blocks",
        ),
        (
            [
                NamedTopology(
                    "t",
                    blocks=BlockTopology(
                        [Block("b1", ["n1", "n2"]), Block("b2", ["n2", "n3"])], [2]
                    ),
                )
            ],
            "t",
            "node n2 is in blocks b1 and b2",
        ),
        (
            [
                NamedTopology(
                    "t", blocks=BlockTopology([Block("b", ["n1"]), Block("b", ["n2"])], [1])
                )
            ],
            "t",
            "duplicate block name",
        ),
        (
            [NamedTopology("t", blocks=BlockTopology([Block("b[1]", ["n1"])], [1]))],
            "t",
            "invalid block name",
        ),
        ([NamedTopology("t", blocks=BlockTopology([Block("b", [])], [1]))], "t", "no block"),
    ],
)
def test_what_slurm_would_misread_is_refused(
    topologies: list[NamedTopology], default: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_topologies(topologies, default)


def test_partition_lines_default_one_per_topology() -> None:
    text = render_partition_lines(ENV, default_partitions(three()), "ib")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        "PartitionName=ib Nodes=gb[01-08] Topology=ib",
        "PartitionName=nvl Nodes=gb[01-12] Topology=nvl",
        "PartitionName=flat Nodes=ALL Topology=flat",
    ]
    assert 'cluster default "ib"' in text


def test_partition_lines_from_a_mapping() -> None:
    parts = partitions_from_map({"gpu": "nvl", "debug": "flat"}, three())
    assert parts == [
        Partition("gpu", "nvl", [f"gb{i:02d}" for i in range(1, 13)]),
        Partition("debug", "flat", []),
    ]
    with pytest.raises(ConfigError, match="unknown topology 'nope'"):
        partitions_from_map({"gpu": "nope"}, three())
    with pytest.raises(ConfigError, match="invalid partition name"):
        partitions_from_map({"gpu part": "nvl"}, three())


@pytest.mark.parametrize(
    ("tree", "blocks", "message"),
    [
        (  # two logical leaves of one name: the block output would list one of them twice
            Tree([LeafGroup("su1", ["g1"], ["n1"]), LeafGroup("su1", ["g2"], ["n2"])], [], []),
            None,
            "duplicate switch name 'su1'",
        ),
        (
            Tree([LeafGroup("su1", ["g1"], ["n1"]), LeafGroup("su2", ["g2"], ["n1"])], [], []),
            None,
            "node n1 is in leaves su1 and su2",
        ),
        (None, BlockTopology([Block("b", ["n1"]), Block("b", ["n2"])], [1]), "duplicate block"),
    ],
)
def test_topology_conf_names_repeat_nowhere(
    tree: Tree | None, blocks: BlockTopology | None, message: str
) -> None:
    """topology.conf passes the same last check as topology.yaml (Slurm checks neither)."""
    with pytest.raises(ConfigError, match=message):
        check_names(tree, blocks)


def _block_multiple_topologies() -> list[NamedTopology]:
    """A tree whose topology.yaml is exactly 8192 bytes unpadded (one leaf name's length
    tuned: each character is one byte)."""

    def topologies(leaves: int, name: str) -> list[NamedTopology]:
        groups = [LeafGroup(f"leaf{i:03d}", ["x"], [f"n{i:03d}"]) for i in range(leaves)]
        groups.append(LeafGroup(name, ["y"], ["last"]))
        return [NamedTopology("ib", tree=Tree(groups, [], [])), NamedTopology("flat")]

    for leaves in range(100, 200):
        size = len(render_topology_yaml(ENV, topologies(leaves, "z"), "ib").encode())
        if 8192 - 63 <= size <= 8192:
            return topologies(leaves, "z" * (8192 - size + 1))
    raise AssertionError("no tree of 8192 bytes")


@pytest.mark.parametrize(
    ("release", "padded"),
    [
        ("25.05", True),
        ("25.05.8", True),
        ("25.11", True),
        ("25.11.5", True),
        ("25.11.6", False),
        ("26.05", False),
        ("26.05.5", False),
    ],
)
def test_a_file_of_a_multiple_of_4096_bytes_is_padded_for_affected_releases(
    release: str, padded: bool
) -> None:
    """Issue 24: slurmctld 25.05.0-25.05.8 and 25.11.0-25.11.5 read past the end of a
    topology.yaml whose size is an exact multiple of 4096 bytes and die."""
    topologies = _block_multiple_topologies()
    text = render_topology_yaml(ENV, topologies, "ib", SlurmVersion.parse(release))
    size = len(text.encode())
    assert (size % 4096 != 0) is padded, size
    assert text.rstrip("\n").splitlines()[-1].startswith("# This line keeps") is padded
    assert yaml.safe_load(text) == yaml.safe_load(render_topology_yaml(ENV, topologies, "ib"))


def test_a_template_override_that_drops_the_padding_is_refused(tmp_path: Path) -> None:
    from topograph_slurm.render.environment import builtin_templates

    source = (builtin_templates() / "topology.yaml.j2").read_text()
    (tmp_path / "topology.yaml.j2").write_text(source[: source.index("{% if pad %}")])
    env = environment(tmp_path)
    with pytest.raises(ConfigError, match="multiple of 4096 bytes even with its padding"):
        render_topology_yaml(env, _block_multiple_topologies(), "ib", SlurmVersion(25, 11, 2))
