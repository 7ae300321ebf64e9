"""``collect --gpu-vendor``: AMD nodes' ``rocm-smi --showtopo`` into the snapshot, read as the
node's GPU topology; ``auto`` runs each vendor's tool only where it exists (the node script
run for real by ``sh``, with a fake rocm-smi printing a real capture and no nvidia-smi)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.amd import split_hive
from tests.support.snapshots import write_node_outputs
from topograph_slurm.cli.collect import collect as collect_command
from topograph_slurm.collect import plan as cp
from topograph_slurm.collect.protocol import new_marker, node_script, parse_framed
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.sources import snapshot as sn

REAL = Path(__file__).parents[1] / "fixtures" / "real"
MI308X = REAL / "rocm-smi-topo" / "mi308x-8gpu-xgmi-2numa-lowpower-warning-msswift.txt"
MI300A = REAL / "rocm-smi-product" / "mi300a-4apu-showproduct-rocmsmilib-changelog.txt"


def test_vendor_commands() -> None:
    assert cp.gpu_commands("nvidia") == cp.DEFAULT_COMMANDS
    assert cp.gpu_commands("amd") == {
        sn.KEY_ROCM_TOPO: ("rocm-smi", "--showtopo"),
        sn.KEY_ROCM_PRODUCT: ("rocm-smi", "--showproduct"),
    }
    auto = cp.gpu_commands("auto")
    assert set(auto) == {*cp.DEFAULT_COMMANDS, *cp.AMD_COMMANDS}
    assert all(argv[:2] == ("sh", "-c") for argv in auto.values())


def test_auto_runs_only_the_tools_the_node_has(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "rocm-smi"
    fake.parent.mkdir()
    fake.write_text(
        f"#!/bin/sh\ncase $1 in --showtopo) cat '{MI308X}' ;; --showproduct) cat '{MI300A}' ;; "
        "*) exit 9 ;; esac\n"
    )
    fake.chmod(0o755)
    marker = new_marker()
    script = node_script(cp.gpu_commands("auto"), 10, marker)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "SLURMD_NODENAME": "mi1"}
    run = subprocess.run(["sh"], input=script, capture_output=True, text=True, env=env, check=True)
    framed = parse_framed(run.stdout, marker)
    assert {key: f.exit_code for key, f in framed.items()} == dict.fromkeys(framed, 0)
    assert framed[sn.KEY_ROCM_TOPO].stdout == MI308X.read_text()
    assert framed[sn.KEY_ROCM_PRODUCT].stdout == MI300A.read_text()
    assert all(framed[key].stdout == "" for key in cp.DEFAULT_COMMANDS)
    outputs = {"mi1": {key: f.stdout for key, f in framed.items()}}
    snap = sn.load_snapshot(write_node_outputs(tmp_path / "snap", outputs))
    node = snap.nodes["mi1"]
    assert snap.findings == [] and node.gpus is None
    assert node.topology is not None and node.topology.vendor == "amd"
    assert node.topology.fast_groups == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert node.products[3] == "Aqua Vanjaram [Instinct MI300A]"


def test_amd_node_with_a_broken_capture_is_a_parse_error(tmp_path: Path) -> None:
    outputs = {"mi1": {sn.KEY_ROCM_TOPO: "=== Link Type between two GPUs ===\nGPU0 0 X\n"}}
    snap = sn.load_snapshot(write_node_outputs(tmp_path / "snap", outputs))
    (finding,) = snap.findings
    assert finding.kind == FindingKind.COLLECT_PARSE_ERROR
    assert finding.message.startswith("rocm-smi-topo: ")


@pytest.mark.parametrize("bad", ["intel", ""])
def test_unknown_vendor_is_a_usage_error(bad: str, tmp_path: Path) -> None:
    args = ["--nodes", "n1", "--snapshot", str(tmp_path / "s"), "--gpu-vendor", bad]
    result = CliRunner().invoke(collect_command, args, obj={})
    assert result.exit_code == 2 and not (tmp_path / "s").exists()


def test_help_names_the_amd_command() -> None:
    result = CliRunner().invoke(collect_command, ["--help"])
    assert "rocm-smi-topo: rocm-smi --showtopo" in result.output
    assert "rocm-smi-product: rocm-smi --showproduct" in result.output
    assert "--gpu-vendor [nvidia|amd|auto]" in result.output


def test_generate_on_an_amd_cluster_reports_the_split_node(tmp_path: Path) -> None:
    """An IB fabric of 8 AMD nodes collected with --gpu-vendor amd: generate takes the IB
    blocks (no NVLink domain), and the node whose GPUs are two xGMI groups is a finding of
    the report, as health reads it (degraded)."""
    import json
    import os

    from topograph_slurm.cli.main import main
    from topograph_slurm.sources import sim

    hive, split = MI308X.read_text(), split_hive(MI308X.read_text())
    outputs = {
        f"gpu{i:04d}": {sn.KEY_ROCM_TOPO: split if i == 3 else hive, sn.KEY_ROCM_PRODUCT: ""}
        for i in range(1, 9)
    }
    spec = sim.parse_sim_spec("nodes=8,rails=2,su=4")
    fabric = {"fabric/ibnetdiscover.txt": sim.generate_ibnetdiscover(spec)}
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    entry |= {"file": "fabric/ibnetdiscover.txt"}
    snap = write_node_outputs(tmp_path / "snap", outputs, fabric, fabric=entry)
    report = tmp_path / "r.json"
    args = ["--snapshot", str(snap), "--format", "block", "--slurm-version", "25.05"]
    args += ["--report", str(report), "--report-format", "json"]
    result = CliRunner().invoke(main, ["--config", os.devnull, "generate", *args])
    assert result.exit_code == 0, result.output
    assert "BlockName=" in result.stdout
    findings = json.loads(report.read_text())["findings"]
    xgmi = [f for f in findings if f["kind"].startswith("xgmi")]
    assert [(f["kind"], f["subject"]) for f in xgmi] == [("xgmi-split", "gpu0003")]
    assert not [f for f in findings if f["kind"] == "collect-missing"]


def test_facts_cache_keeps_amd_nodes_as_read(tmp_path: Path) -> None:
    """facts.json (what collect keeps beside the snapshot) gives an AMD node back as reading
    its files gives it: the rocm-smi topology, its vendor and the product names."""
    outputs = {
        "mi1": {
            sn.KEY_ROCM_TOPO: MI308X.read_text(),
            sn.KEY_ROCM_PRODUCT: MI300A.read_text(),
            sn.KEY_TOPO: "",  # auto: no nvidia-smi on the node
        }
    }
    snap = write_node_outputs(tmp_path / "snap", outputs)
    fresh = sn.load_snapshot(snap).nodes["mi1"]
    (snap / sn.FACTS_FILE).write_bytes(sn.snapshot_facts(snap))
    kept = sn.load_snapshot(snap)
    assert kept.findings == []
    node = kept.nodes["mi1"]
    assert (node.topology, node.products) == (fresh.topology, fresh.products)
    assert node.topology is not None and node.topology.vendor == "amd"
