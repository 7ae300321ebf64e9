"""The fabric summary: what an analysed fabric and a topology file show, and its kept file
(round trip, determinism, version and shape checks)."""

from __future__ import annotations

import pytest

from tests.support.fabric_builder import FabricBuilder
from topograph_slurm.analysis.fabric.analyse import analyse, ib_blocks
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.analysis.state.summary import from_topology, summarize
from topograph_slurm.errors import InputError
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.model.summary import FACT_BLOCKS, FACT_DOMAINS, FACT_RAILS, RailSummary
from topograph_slurm.sources import ibnetdiscover, sim
from topograph_slurm.sources import summary as summary_file
from topograph_slurm.sources.layout import looks_like_topology, parse_topology

SEEN = "2026-12-01T12:00:00Z"


def _sim_summary(spec: str):  # type: ignore[no-untyped-def]
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec(spec))
    analysis = analyse(ibnetdiscover.parse_ibnetdiscover(text, f"sim:{spec}"), NamingPolicy())
    return summarize(analysis, ib_blocks(analysis, SlurmVersion.parse("25.05")), SEEN)


def test_a_fabric_shows_places_rails_and_rates() -> None:
    summary = _sim_summary("nodes=16,su=8,rails=2,degraded=1")
    node = summary.nodes["gpu0001"]
    assert (node.leaf, node.block, node.last_seen, node.kept) == (
        "leaf-su001-r0",
        "leaf-su001-r0",
        SEEN,
        False,
    )
    assert node.rails == [
        RailSummary("mlx5_0", "leaf-su001-r0", 1, "1xNDR"),
        RailSummary("mlx5_1", "leaf-su001-r1", 1, "4xNDR"),
    ]
    assert not any(n.rails_disagree for n in summary.nodes.values())
    assert _sim_summary("nodes=16,su=8,rails=4,disagree=3").nodes["gpu0003"].rails_disagree
    assert list(summary.nodes) == [f"gpu{i:04d}" for i in range(1, 17)]
    assert [b.name for b in summary.blocks] == ["leaf-su001-r0", "leaf-su002-r0"]
    assert summary.block_sizes == [8, 16] and summary.link_norm == "4xNDR"
    assert FACT_DOMAINS not in summary.known and FACT_RAILS in summary.known


def test_switch_cables_below_the_norm_are_kept_by_their_ends() -> None:
    fabric = FabricBuilder()
    for name in ("leaf1", "leaf2", "spine1"):
        fabric.switch(name)
    fabric.host("n1", ["leaf1"])
    fabric.host("n2", ["leaf2"])
    fabric.cable("leaf1", "spine1")
    fabric.cable("leaf2", "spine1", "4x", "HDR")
    fabric.cable("leaf1", "spine1")
    analysis = analyse(fabric.fabric, NamingPolicy())
    summary = summarize(analysis, None, SEEN)
    assert summary.slow_links == {"leaf2/2 <-> spine1/2": "4xHDR"}
    assert FACT_BLOCKS not in summary.known  # a tree run formed no blocks


def test_a_topology_file_shows_only_nodes_leaves_and_blocks() -> None:
    conf = "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n3\nSwitchName=top Switches=l[1-2]\n"
    summary = from_topology(parse_topology(conf), "topology.conf")
    assert summary.known == ["nodes", "leaves"]
    assert {name: node.leaf for name, node in summary.nodes.items()} == {
        "n1": "l1",
        "n2": "l1",
        "n3": "l2",
    }
    block = from_topology(parse_topology("BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\n"), "b")
    assert block.known == ["nodes", "blocks"] and block.block_sizes == [4]


def test_topology_files_are_told_from_dumps() -> None:
    assert looks_like_topology("# c\nSwitchName=s Nodes=n1\n")
    assert looks_like_topology("# generated\n---\n- topology: ib\n  tree: {}\n")
    dump = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=2,su=2"))
    assert not looks_like_topology(dump)


def test_the_kept_file_round_trips_byte_for_byte() -> None:
    summary = _sim_summary("nodes=16,su=8,degraded=2")
    data = summary_file.encode(summary)
    assert summary_file.looks_like_summary(data)
    assert summary_file.decode(data, "kept") == summary
    assert summary_file.encode(summary_file.decode(data, "kept")) == data
    assert data.endswith(b"\n") and b'"version": 1' in data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not a fabric summary"),
        (b'{"format": "other", "version": 1}', "format 'other'"),
        (b'{"format": "topograph-slurm-fabric-summary", "version": 2}', "version 2; this"),
        (
            b'{"format": "topograph-slurm-fabric-summary", "version": 1, '
            b'"summary": {"source": "x", "nodes": []}}',
            "invalid fabric summary: Expected `object`, got `array` - at `$.summary.nodes`",
        ),
    ],
)
def test_a_bad_kept_file_is_one_input_error(data: bytes, message: str) -> None:
    with pytest.raises(InputError, match=r"^kept: ") as caught:
        summary_file.decode(data, "kept")
    assert message in str(caught.value)


def test_the_summary_sits_in_the_state_dir_named_after_the_target(tmp_path) -> None:  # type: ignore[no-untyped-def]
    state = tmp_path / "state"
    here = summary_file.summary_path(tmp_path / "topology.conf", state)
    there = summary_file.summary_path(tmp_path / "test" / "topology.conf", state)
    assert here.parent == state and here.name.startswith("topology.conf-")
    assert here.name.endswith(".fabric.json") and here != there  # two targets, two files
    (tmp_path / "link.conf").symlink_to(tmp_path / "topology.conf")
    assert summary_file.summary_path(tmp_path / "link.conf", state) == here
    assert summary_file.legacy_summary_path(tmp_path / "topology.conf") == (
        tmp_path / ".topology.conf.fabric.json"
    )
    assert summary_file.load_summary(tmp_path / "absent.json") is None
