"""``diff`` and the drift it prints: each change class, every mix of input kinds, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import real_fixture
from tests.support.sim_gpu import nvl_node_gpus, render_query_q
from tests.support.snapshots import write_node_outputs
from topograph_slurm.analysis.state import drift as d
from topograph_slurm.analysis.state.drift import drift
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import Exit
from topograph_slurm.model.result import Block
from topograph_slurm.model.summary import (
    ALL_FACTS,
    FabricSummary,
    NodeSummary,
    RailSummary,
)
from topograph_slurm.sources import sim
from topograph_slurm.sources.summary import summary_path


def _node(leaf: str = "leaf1", block: str = "b1", **kwargs: object) -> NodeSummary:
    rails = [
        RailSummary("mlx5_0", leaf, 1, "4xNDR"),
        RailSummary("mlx5_1", leaf + "-r1", 1, "4xNDR"),
    ]
    return NodeSummary(
        leaf=leaf, block=block, rails=rails, last_seen="2026-01-01T00:00:00Z", **kwargs
    )  # type: ignore[arg-type]


def _summary(source: str = "old", **kwargs: object) -> FabricSummary:
    base: dict[str, object] = {
        "known": list(ALL_FACTS),
        "nodes": {"n1": _node(), "n2": _node()},
        "switches": ["leaf1", "leaf1-r1", "spine1"],
        "blocks": [Block("b1", ["n1", "n2"])],
        "block_sizes": [2],
        "link_norm": "4xNDR",
    }
    return FabricSummary(source, **{**base, **kwargs})  # type: ignore[arg-type]


def _kinds(old: FabricSummary, new: FabricSummary) -> list[tuple[str, str]]:
    return [(c.kind, c.subject) for c in drift(old, new).changes]


def test_same_summary_has_no_changes() -> None:
    result = drift(_summary(), _summary("new"))
    assert not result.changed and result.changes == [] and result.not_compared == []


def test_nodes_appeared_and_vanished() -> None:
    new = _summary("new", nodes={"n1": _node(), "n3": _node()})
    assert _kinds(_summary(), new) == [(d.KIND_NODE_APPEARED, "n3"), (d.KIND_NODE_VANISHED, "n2")]


def test_node_moved_to_another_leaf_block_and_domain() -> None:
    old = _summary(nodes={"n1": _node(domain="rack1"), "n2": _node()})
    new = _summary("new", nodes={"n1": _node("leaf2", "b2", domain="rack2"), "n2": _node()})
    (change,) = [c for c in drift(old, new).changes if c.kind == d.KIND_NODE_MOVED]
    assert change.subject == "n1"
    assert change.message == "leaf leaf1 -> leaf2, block b1 -> b2, domain rack1 -> rack2"


def test_cable_moved_and_rail_disagreement_appeared_then_healed() -> None:
    moved = _node(rails_disagree=True)
    moved.rails[1] = RailSummary("mlx5_1", "leaf9-r1", 7, "4xNDR")
    new = _summary("new", nodes={"n1": moved, "n2": _node()})
    assert _kinds(_summary(), new) == [
        (d.KIND_CABLE_MOVED, "n1/mlx5_1"),
        (d.KIND_DISAGREE_APPEARED, "n1"),
    ]
    assert drift(_summary(), new).changes[0].message == "leaf1-r1/1 -> leaf9-r1/7"
    assert (d.KIND_DISAGREE_HEALED, "n1") in _kinds(new, _summary())


def test_links_degraded_restored_down_and_up_per_cable() -> None:
    slow = _node()
    slow.rails[0] = RailSummary("mlx5_0", "leaf1", 1, "1xNDR")
    one_rail = _node()
    del one_rail.rails[1]
    new = _summary("new", nodes={"n1": slow, "n2": one_rail})
    assert _kinds(_summary(), new) == [
        (d.KIND_LINK_DEGRADED, "n1/mlx5_0"),
        (d.KIND_LINK_DOWN, "n2/mlx5_1"),
    ]
    assert _kinds(new, _summary()) == [
        (d.KIND_LINK_RESTORED, "n1/mlx5_0"),
        (d.KIND_LINK_UP, "n2/mlx5_1"),
    ]
    assert drift(_summary(), new).changes[0].message == "4xNDR -> 1xNDR"


def test_switch_cables_below_the_norm_degrade_and_restore() -> None:
    cable = "leaf1/40 <-> spine1/1"
    new = _summary("new", slow_links={cable: "4xHDR"})
    (change,) = drift(_summary(), new).changes
    assert (change.kind, change.subject, change.message) == (
        d.KIND_LINK_DEGRADED,
        cable,
        "4xNDR -> 4xHDR",
    )
    (back,) = drift(new, _summary()).changes
    assert (back.kind, back.message) == (d.KIND_LINK_RESTORED, "4xHDR -> 4xNDR")
    # a slow cable whose switch is gone is not "restored": the switch removal says it
    gone = _summary("new", switches=["leaf1", "leaf1-r1"])
    assert _kinds(new, gone) == [(d.KIND_SWITCH_REMOVED, "spine1")]


def test_switches_added_and_removed() -> None:
    new = _summary("new", switches=["leaf1", "leaf1-r1", "spine2"])
    assert _kinds(_summary(), new) == [
        (d.KIND_SWITCH_ADDED, "spine2"),
        (d.KIND_SWITCH_REMOVED, "spine1"),
    ]


def test_blocks_added_removed_changed_reordered_and_sizes() -> None:
    old = _summary(
        blocks=[Block("b1", ["n1", "n2"]), Block("b2", []), Block("b3")],
    )
    new = _summary(
        "new",
        blocks=[Block("b3"), Block("b1", ["n1"]), Block("b4", ["n2"])],
        block_sizes=[1, 2],
    )
    assert _kinds(old, new) == [
        (d.KIND_BLOCK_ADDED, "b4"),
        (d.KIND_BLOCK_REMOVED, "b2"),
        (d.KIND_BLOCK_CHANGED, "b1"),
        (d.KIND_BLOCKS_REORDERED, "blocks"),
        (d.KIND_BLOCK_SIZES, "BlockSizes"),
    ]
    changed = next(c for c in drift(old, new).changes if c.kind == d.KIND_BLOCK_CHANGED)
    assert changed.message == "-1 n2 (1 nodes)"


def test_a_kept_node_is_absent_not_moved_and_its_expiry_is_a_change() -> None:
    kept = _node(kept=True)
    now = _summary("new", nodes={"n1": _node(), "n2": kept})
    (gone,) = drift(_summary(), now).changes
    assert gone.kind == d.KIND_NODE_VANISHED and "kept at leaf leaf1" in gone.message
    assert drift(now, now).changes == []  # still kept: nothing new
    (dropped,) = drift(now, _summary("new", nodes={"n1": _node()})).changes
    assert dropped.kind == d.KIND_NODE_VANISHED and "no longer kept" in dropped.message
    (back,) = drift(now, _summary()).changes
    assert back.kind == d.KIND_NODE_APPEARED and "back" in back.message


def test_only_facts_both_inputs_show_are_compared() -> None:
    conf = FabricSummary("topology.conf", ["nodes", "leaves"], {"n1": NodeSummary("leaf1")})
    result = drift(conf, _summary("dump"))
    assert [(c.kind, c.subject) for c in result.changes] == [(d.KIND_NODE_APPEARED, "n2")]
    assert result.not_compared == [
        "blocks and BlockSizes: topology.conf cannot show them",
        "cables, link rates and rail disagreement: topology.conf cannot show them",
        "switches: topology.conf cannot show them",
        "NVLink domains: topology.conf cannot show them",
    ]


def test_changes_sort_naturally_within_a_kind() -> None:
    names = ["n10", "n2", "n1"]
    new = _summary("new", nodes={name: _node() for name in names})
    old = _summary(nodes={})
    assert [c.subject for c in drift(old, new).changes] == ["n1", "n2", "n10"]


# --------------------------------------------------------------------------- the command


def _diff(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--config", os.devnull, "diff", *args])
    return result.exit_code, result.stdout, result.stderr


def _dump(path: Path, spec: str) -> Path:
    path.write_text(sim.generate_ibnetdiscover(sim.parse_sim_spec(spec)))
    return path


@pytest.mark.parametrize("empty", ["sim:", "sim:  "])
def test_an_empty_simulation_is_refused_before_any_fabric_is_read(empty: str) -> None:
    """``sim:`` once ran the live ibnetdiscover (an empty --sim is no source at all)."""
    code, out, err = _diff(empty, "sim:demo")
    assert code == Exit.USAGE and out == ""
    assert err.strip().splitlines() == [
        f"topograph-slurm: error: {empty!r} names no simulation: sim:demo or sim:nodes=N,…"
    ]


def test_two_simulated_fabrics_text() -> None:
    code, out, _ = _diff("sim:nodes=16,su=8", "sim:nodes=16,su=8,degraded=1,disagree=3")
    assert code == Exit.DIFFERS
    assert out.splitlines()[:8] == [
        "topograph-slurm diff",
        "Old: sim:nodes=16,su=8",
        "New: sim:nodes=16,su=8,degraded=1,disagree=3",
        "",
        "Changes (3):",
        "  [cable-moved] gpu0003/mlx5_7: leaf-su001-r7/3 -> leaf-su002-r7/17",
        "  [rail-disagreement-appeared] gpu0003: rails reach leaves "
        "leaf-su001-r[0-6],leaf-su002-r7",
        "  [link-degraded] gpu0001/mlx5_0: 4xNDR -> 1xNDR",
    ]


def test_same_fabric_from_a_dump_and_a_snapshot_exits_0(tmp_path: Path) -> None:
    dump = _dump(tmp_path / "fabric.txt", "nodes=16,su=8")
    fabric = {"fabric/ibnetdiscover.txt": dump.read_text()}
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    entry["file"] = "fabric/ibnetdiscover.txt"
    snap = write_node_outputs(tmp_path / "snap", {}, fabric, fabric=entry)
    code, out, _ = _diff(str(dump), str(snap), "--json")
    data = json.loads(out)
    assert code == Exit.OK and data["changed"] is False and data["changes"] == []
    assert data["old"] == str(dump) and data["new"] == str(snap)


@pytest.mark.parametrize("fmt", ["tree", "block", "yaml"])
def test_topology_file_against_a_fabric(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "topology"
    generated = CliRunner().invoke(
        main,
        [
            "--config",
            os.devnull,
            "generate",
            "--sim",
            "nodes=16,su=8",
            "--format",
            fmt,
            "--slurm-version",
            "25.05",
            "-o",
            str(out),
        ],
    )
    assert generated.exit_code == 0, generated.output
    code, text, _ = _diff(str(out), "sim:nodes=16,su=8", "--slurm-version", "25.05", "--json")
    data = json.loads(text)
    assert code == Exit.OK and data["changes"] == []
    assert any(line.startswith("cables, link rates") for line in data["not_compared"])
    code, text, _ = _diff(str(out), "sim:nodes=14,su=8", "--slurm-version", "25.05", "--json")
    vanished = [c["subject"] for c in json.loads(text)["changes"] if c["kind"] == "node-vanished"]
    assert code == Exit.DIFFERS and vanished == ["gpu0015", "gpu0016"]


def test_kept_summary_against_a_dump(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    CliRunner().invoke(
        main, ["--config", os.devnull, "generate", "--sim", "nodes=16,su=8", "-o", str(out)]
    )
    kept = summary_path(out, state_dir(Settings()))
    dump = _dump(tmp_path / "today.txt", "nodes=24,su=8")
    code, text, _ = _diff(str(kept), str(dump), "--json")
    kinds = {c["kind"] for c in json.loads(text)["changes"]}
    assert code == Exit.DIFFERS
    assert kinds == {"node-appeared", "switch-added", "block-added"}


def test_a_real_dump_against_itself_is_the_same() -> None:
    dump = real_fixture("ibnetdiscover/dgx-superpod-ndr-quantum2-mqm9701.txt")
    code, out, _ = _diff(str(dump), str(dump))
    assert code == Exit.OK and "Changes (0):\n  none\n" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("hello\n", "no InfiniBand devices found"),
        ('{"format": "topograph-slurm-fabric-summary", "version": 99}', "version 99"),
        (
            '{"format": "topograph-slurm-fabric-summary", "version": 1, "summary": 3}',
            "invalid fabric summary",
        ),
        ("SwitchName=s1 Switches=nope\n", "unknown switch"),
        ('{"nodes": []}', "JSON that is neither a kept fabric summary nor a bench record"),
        ("  [1, 2]\n", "JSON that is neither"),
    ],
)
def test_unreadable_input_is_one_line_and_exit_3(
    tmp_path: Path, content: str | None, message: str
) -> None:
    bad = tmp_path / "bad"
    if content is not None:
        bad.write_text(content)
    code, out, err = _diff(str(bad), "sim:nodes=16,su=8")
    assert code == Exit.INPUT and out == ""
    assert err.count("\n") == 1 and err.startswith("topograph-slurm: error: ") and message in err


def test_bad_sim_spec_is_a_usage_or_config_error() -> None:
    code, _, err = _diff("sim:nodes=x", "sim:demo")
    assert code != Exit.BUG and err.startswith("topograph-slurm: error: sim spec")


def _nvl_snapshot(root: Path, rack_of: dict[str, int]) -> Path:
    """A snapshot of 8 nodes on a two-unit IB fabric, each node's GPUs in NVLink domain
    ``rack_of[node]``."""
    uuid = "{:08x}-7b3d-4e9f-a1c6-0d2e4b6a8c10"
    outputs = {
        node: {"nvidia-smi-q": render_query_q(nvl_node_gpus(uuid.format(rack), 1))}
        for node, rack in rack_of.items()
    }
    fabric = {
        "fabric/ibnetdiscover.txt": _dump(
            root.parent / f"{root.name}.txt", "nodes=8,rails=2,su=4"
        ).read_text()
    }
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    entry["file"] = "fabric/ibnetdiscover.txt"
    return write_node_outputs(root, outputs, fabric, fabric=entry)


def test_a_node_in_another_nvlink_domain_is_a_move(tmp_path: Path) -> None:
    racks = {f"gpu{i:04d}": 1 + (i - 1) // 4 for i in range(1, 9)}
    before = _nvl_snapshot(tmp_path / "before", racks)
    after = _nvl_snapshot(tmp_path / "after", {**racks, "gpu0004": 2})
    code, out, _ = _diff(str(before), str(after), "--slurm-version", "25.05", "--json")
    data = json.loads(out)
    moved = [c for c in data["changes"] if c["kind"] == "node-moved"]
    assert code == Exit.DIFFERS and moved[0]["subject"] == "gpu0004"
    assert moved[0]["message"] == (
        "block nvl-gpu0001 -> nvl-gpu0004, domain 00000001-7b3d-4e9f-a1c6-0d2e4b6a8c10.1 -> "
        "00000002-7b3d-4e9f-a1c6-0d2e4b6a8c10.1"
    )
    # its new rack's block is named after its first node now (diff keeps no layout): the
    # rack-mates moved by name only, in the same domain
    assert {c["message"] for c in moved[1:]} == {"block nvl-gpu0005 -> nvl-gpu0004"}
    assert not any(line.startswith("NVLink domains") for line in data["not_compared"])
