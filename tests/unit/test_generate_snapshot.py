"""`generate --snapshot`: NVLink blocks and topology.yaml from a collected snapshot."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from tests.support.sim_gpu import nvl_node_gpus, render_query_q
from tests.support.snapshots import write_node_outputs
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources import sim

KEY_Q = "nvidia-smi-q"
UUID = "{:08x}-7b3d-4e9f-a1c6-0d2e4b6a8c10"


def make_snapshot(root: Path, racks: int = 4, ib: bool = False, sick: str = "gpu0006") -> Path:
    """Racks of 4 nodes (gpu0001…), one NVLink clique per rack, *sick* still In Progress."""
    outputs = {}
    for rack in range(racks):
        for slot in range(4):
            node = f"gpu{rack * 4 + slot + 1:04d}"
            state = "In Progress" if node == sick else "Completed"
            outputs[node] = {
                KEY_Q: render_query_q(nvl_node_gpus(UUID.format(rack + 1), 1, state=state))
            }
    if not ib:
        return write_node_outputs(root, outputs)
    # the same 16 nodes on an IB fabric of two 8-node units
    spec = sim.parse_sim_spec(f"nodes={racks * 4},rails=2,su=8")
    fabric = {"fabric/ibnetdiscover.txt": sim.generate_ibnetdiscover(spec)}
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    return write_node_outputs(
        root, outputs, fabric, fabric=entry | {"file": "fabric/ibnetdiscover.txt"}
    )


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, "generate", *args])


def test_snapshot_blocks_are_nvlink_racks_and_sick_node_is_reported(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "snap")
    report = tmp_path / "r.json"
    result = run(
        "--snapshot",
        str(snap),
        "--format",
        "block",
        "--slurm-version",
        "25.05",
        "--report",
        str(report),
        "--json",
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if not line.startswith("#")]
    assert lines == [
        "BlockName=nvl-gpu0001 Nodes=gpu[0001-0004]",
        "BlockName=nvl-gpu0005 Nodes=gpu[0005,0007-0008]",
        "BlockName=nvl-gpu0009 Nodes=gpu[0009-0012]",
        "BlockName=nvl-gpu0013 Nodes=gpu[0013-0016]",
        "BlockSizes=4,8,16",
    ]
    findings = json.loads(report.read_text())["findings"]
    assert any(f["subject"] == "gpu0006" and "In Progress" in f["message"] for f in findings)


def test_snapshot_on_2411_leaves_out_the_undersized_rack(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "snap")
    result = run("--snapshot", str(snap), "--format", "block", "--slurm-version", "24.11")
    assert result.exit_code == 0, result.output
    assert "gpu[0005,0007-0008]" not in result.stdout
    assert result.stdout.count("BlockName=") == 3


def test_snapshot_yaml_has_tree_blocks_and_flat_with_partition_lines(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "snap", ib=True)
    out = tmp_path / "topology.yaml"
    result = run(
        "--snapshot", str(snap), "--format", "yaml", "--slurm-version", "25.05", "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    kinds = {
        entry["topology"]: next(k for k in ("tree", "block", "flat") if k in entry)
        for entry in data
    }
    assert kinds == {"ib": "tree", "nvl": "block", "flat": "flat"}
    assert [entry["topology"] for entry in data if entry.get("cluster_default")] == ["ib"]
    assert "PartitionName=nvl" in result.stderr and "Topology=nvl" in result.stderr


def test_yaml_is_refused_for_2411(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "snap", ib=True)
    out = tmp_path / "topology.yaml"
    result = run("--snapshot", str(snap), "--format", "yaml", "-o", str(out))
    assert result.exit_code == Exit.CONFIG
    assert result.stderr.count("\n") == 1 and not out.exists()


def test_snapshot_source_conflicts_and_missing_snapshot(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "snap")
    both = run("--snapshot", str(snap), "--sim", "demo")
    assert both.exit_code == Exit.USAGE
    missing = run("--snapshot", str(tmp_path / "none"), "--format", "block")
    assert missing.exit_code == Exit.INPUT and missing.stderr.count("\n") == 1
