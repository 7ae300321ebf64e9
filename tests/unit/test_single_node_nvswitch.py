"""Snapshots of ordinary HGX H100 nodes: their real ``nvidia-smi -q`` says fabric State
Completed, CliqueId 0 and an all-zero ClusterUUID (a single-node NVSwitch). No GPU names a
multi-node NVLink domain, so the InfiniBand fabric decides the blocks, as it does for nodes
without NVLink (fabric N/A); every fabric command reads such a snapshot, and the report says
where the blocks came from (``block-source``). ``--block-source nvlink`` asked for there is one
clear error line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.snapshots import write_node_outputs
from tests.unit.test_health_cli import fake_scontrol, slurm_node
from tests.unit.test_record import setup
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources import sim
from topograph_slurm.sources.snapshot import KEY_Q

REAL_Q = Path(__file__).parents[1] / "fixtures" / "real" / "nvidia-smi-q"
H100 = REAL_Q / "h100-sxm-8gpu-hgx-q-fabric-completed.txt"
A100_NA = REAL_Q / "a100-sxm-4gpu-q-fabric-na.txt"
NODES = [f"gpu{i:04d}" for i in range(1, 17)]


def snapshot(root: Path, capture: Path = H100, ib: bool = True, sick: str = "") -> Path:
    """16 nodes whose ``nvidia-smi -q`` is *capture*, on two 8-node IB units (with *ib*);
    the *sick* node's NVSwitch fabric still In Progress."""
    text = capture.read_text()
    outputs = {node: {KEY_Q: text} for node in NODES}
    if sick:
        outputs[sick] = {KEY_Q: text.replace(": Completed", ": In Progress")}
    if not ib:
        return write_node_outputs(root, outputs)
    spec = sim.parse_sim_spec("nodes=16,gpus=8,rails=2,su=8")
    fabric = {"fabric/ibnetdiscover.txt": sim.generate_ibnetdiscover(spec)}
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    return write_node_outputs(
        root, outputs, fabric, fabric=entry | {"file": "fabric/ibnetdiscover.txt"}
    )


def run(*args: str, config: str = os.devnull) -> Result:
    return CliRunner().invoke(main, ["--config", config, *args])


@pytest.mark.parametrize("capture", [H100, A100_NA], ids=["h100-zero-uuid", "a100-fabric-na"])
@pytest.mark.parametrize("fmt", ["block", "tree"])
def test_generate_takes_the_blocks_from_the_ib_units(
    tmp_path: Path, capture: Path, fmt: str
) -> None:
    snap = snapshot(tmp_path / "snap", capture)
    out, report = tmp_path / "topology.conf", tmp_path / "report.json"
    result = run(
        "generate",
        "--snapshot",
        str(snap),
        "--format",
        fmt,
        "--slurm-version",
        "24.11",
        "-o",
        str(out),
        "--report",
        str(report),
        "--json",
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    if fmt == "block":
        assert text.count("BlockName=") == 2 and "Nodes=gpu[0001-0008]" in text
        assert "BlockSizes=8" in text
    else:
        assert "Nodes=gpu[0001-0008]" in text and "Nodes=gpu[0009-0016]" in text
    findings = json.loads(report.read_text())["findings"]
    source = [f for f in findings if f["kind"] == "block-source"]
    assert len(source) == 1 and "no GPU names a multi-node NVLink domain" in source[0]["message"]


def test_every_fabric_command_reads_the_snapshot(tmp_path: Path) -> None:
    snap = str(snapshot(tmp_path / "snap"))
    explain = run(
        "explain",
        "--snapshot",
        snap,
        "--nodes",
        "gpu[0001-0002]",
        "--gpus-per-node",
        "8",
        "--tp",
        "8",
    )
    assert explain.exit_code == 0, explain.output
    health = run_health(tmp_path, snap)
    assert health.exit_code == Exit.DIFFERS, health.output  # topo_ok and leaf labels to set
    verdicts = json.loads(health.stdout)
    assert {n["verdict"] for n in verdicts["nodes"]} == {"healthy"} and len(verdicts["nodes"]) == 16
    draw = run("draw", "--snapshot", snap, "-o", str(tmp_path / "f.svg"))
    assert draw.exit_code == 0, draw.output
    bench = run("bench", "--plan", "--snapshot", snap, "--gpus-per-node", "8")
    assert bench.exit_code == 0, bench.output


def run_health(tmp_path: Path, snap: str) -> Result:
    (tmp_path / "slurm").mkdir()
    slurm = fake_scontrol(tmp_path / "slurm")
    (slurm / "nodes.json").write_text(json.dumps({"nodes": [slurm_node(n) for n in NODES]}))
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    argv = ["--config", os.devnull, "health", "--snapshot", snap, "--json"]
    return CliRunner().invoke(main, argv, env=env)


def test_a_node_whose_nvswitch_fabric_is_not_up_is_still_drained(tmp_path: Path) -> None:
    """The blocks come from IB, but a GPU fabric that did not come up is still news."""
    health = run_health(tmp_path, str(snapshot(tmp_path / "snap", sick="gpu0006")))
    rows = {row["node"]: row for row in json.loads(health.stdout)["nodes"]}
    assert rows["gpu0006"]["verdict"] == "drain"
    assert rows["gpu0006"]["drain_reason"] == "topograph: fabric-not-completed"
    assert {rows[n]["verdict"] for n in NODES if n != "gpu0006"} == {"healthy"}


def test_explain_takes_block_source_like_every_fabric_command(tmp_path: Path) -> None:
    snap = str(snapshot(tmp_path / "snap"))
    for command in (
        ["explain", "--nodes", "gpu0001", "--gpus-per-node", "8"],
        ["bench", "--plan", "--gpus-per-node", "8"],
        ["draw", "-o", str(tmp_path / "x.svg")],
    ):
        result = run(*command, "--snapshot", snap, "--block-source", "ib")
        assert result.exit_code in (Exit.OK, Exit.DIFFERS), (command, result.output)


def test_block_source_nvlink_without_a_multi_node_domain_is_one_line(tmp_path: Path) -> None:
    snap = str(snapshot(tmp_path / "snap"))
    out = tmp_path / "topology.conf"
    result = run(
        "generate",
        "--snapshot",
        snap,
        "--block-source",
        "nvlink",
        "--format",
        "block",
        "-o",
        str(out),
    )
    assert result.exit_code == Exit.INPUT, result.output
    assert result.stderr.count("\n") == 1
    assert "no GPU names a multi-node NVLink domain" in result.stderr
    assert not out.exists()


def test_record_start_places_the_job_on_the_ib_units(tmp_path: Path) -> None:
    snap = snapshot(tmp_path / "snap")
    config = setup(tmp_path, ["gpu0001", "gpu0009"], "topograph:tp=16,gpn=8,group=2,src=user")
    config.write_text(
        config.read_text().replace(
            "sim: 'nodes=16,gpus=8,rails=2,su=8,tiers=2'", f"snapshot: {snap}"
        )
    )
    assert f"snapshot: {snap}" in config.read_text()
    result = run("record", "start", "7", config=str(config))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "records" / "job-7.json").read_text())
    assert [n["node"] for n in data["nodes"]] == ["gpu0001", "gpu0009"]
    assert data["nodes"][0]["leaf"] != data["nodes"][1]["leaf"]
