"""GPU↔NIC affinity end to end: a snapshot of four DGX H100 nodes (the real capture), one of
which lost its mlx5_ib3, through ``generate --report``, ``health``'s dry run against a fake
``scontrol``, and ``draw``'s node view."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner, Result

from tests.support.affinity import numa_moved, real_topology, without_nics
from tests.support.sim_gpu import nvl_node_gpus, render_query_q, render_topo_matrix
from tests.support.snapshots import write_node_outputs
from tests.unit.test_draw import drawn
from tests.unit.test_health_cli import fake_scontrol, slurm_node
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources import sim
from topograph_slurm.sources.snapshot import KEY_Q, KEY_TOPO

NODES = [f"gpu{i:04d}" for i in range(1, 5)]
SICK = "gpu0003"
RACK = "c0ffee00-0000-0000-0000-00000000a001"


def snapshot(root: Path) -> Path:
    """Four nodes in one NVLink rack on a two-rail IB unit; SICK's mlx5_ib3 is gone."""
    topo = real_topology()
    gpus = render_query_q(nvl_node_gpus(RACK, 1, 8), product="NVIDIA H100 80GB HBM3")
    outputs = {
        node: {
            KEY_Q: gpus,
            KEY_TOPO: render_topo_matrix(without_nics(topo, "mlx5_ib3") if node == SICK else topo),
        }
        for node in NODES
    }
    spec = sim.parse_sim_spec("nodes=4,rails=2,su=4")
    fabric = {"fabric/ibnetdiscover.txt": sim.generate_ibnetdiscover(spec)}
    entry = {"node": NODES[0], "command": "ibnetdiscover", "exit_code": 0}
    return write_node_outputs(root, outputs, fabric, fabric=entry | {"file": next(iter(fabric))})


def test_generate_reports_the_node_that_lost_a_nic(tmp_path: Path) -> None:
    snap, report = snapshot(tmp_path / "snap"), tmp_path / "report.json"
    argv = ["--config", os.devnull, "generate", "--snapshot", str(snap), "--format", "block"]
    result = CliRunner().invoke(
        main,
        [*argv, "--slurm-version", "25.05", "--report", str(report), "--json"],
    )
    assert result.exit_code == 0, result.output
    found = [
        (f["kind"], f["subject"])
        for f in json.loads(report.read_text())["findings"]
        if f["kind"].startswith("gpu-nic-")
    ]
    assert found == [("gpu-nic-rails-uneven", SICK)]


def health_json(tmp_path: Path, snap: Path) -> Result:
    """`health --snapshot SNAP --json`'s dry run against a fake scontrol listing NODES."""
    slurm = fake_scontrol(tmp_path)
    (slurm / "nodes.json").write_text(json.dumps({"nodes": [slurm_node(n) for n in NODES]}))
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    argv = ["--config", os.devnull, "health", "--snapshot", str(snap), "--slurm-version", "25.05"]
    return CliRunner().invoke(main, [*argv, "--json"], env=env)


def test_health_degrades_the_node_that_lost_a_nic_and_drains_nothing(tmp_path: Path) -> None:
    result = health_json(tmp_path, snapshot(tmp_path / "snap"))
    assert result.exit_code == Exit.DIFFERS, result.output
    rows = {row["node"]: row for row in json.loads(result.stdout)["nodes"]}
    assert rows[SICK]["verdict"] == "degraded"
    assert rows[SICK]["weight"]["new"] > rows[SICK]["weight"]["now"]
    assert {rows[n]["verdict"] for n in NODES if n != SICK} == {"healthy"}
    assert (tmp_path / "updates.log").exists() is False  # a dry run changes nothing


def test_draw_marks_the_gpus_without_a_nic_of_their_own(tmp_path: Path) -> None:
    snap = snapshot(tmp_path / "snap")
    argv = ["--config", os.devnull, "draw", "--snapshot", str(snap), "--node", SICK]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    by_key, _, legend = drawn(result.stdout)
    assert "fault-affinity" in by_key["GPU2"] and "fault-affinity" in by_key["GPU3"]
    assert not any("fault-affinity" in by_key[f"GPU{g}"] for g in (0, 1, 4, 5, 6, 7))
    assert "fault-affinity" in by_key["mlx5_ib2"]  # the NIC GPU2 and GPU3 share now
    assert "fault-affinity" in legend
    healthy = CliRunner().invoke(main, [*argv[:-1], NODES[0]])
    _, classes, legend = drawn(healthy.stdout)
    assert "fault-affinity" not in classes and "fault-affinity" not in legend


def test_draw_marks_a_saved_matrix_whose_gpu_is_far_from_its_nic(tmp_path: Path) -> None:
    """GPU3's NUMA Affinity says 1 while its PIX rail mlx5_ib3 sits with NUMA 0's GPUs."""
    matrix = tmp_path / "topo.txt"
    matrix.write_text(render_topo_matrix(numa_moved(real_topology(), 3, 1)))
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "draw", "--topo-matrix", str(matrix)]
    )
    assert result.exit_code == 0, result.output
    by_key, _, _ = drawn(result.stdout)
    marked = {key for key, classes in by_key.items() if "fault-affinity" in classes}
    assert marked == {"GPU3", "mlx5_ib3"}


def test_the_fabric_view_marks_the_node_that_lost_a_nic(tmp_path: Path) -> None:
    snap = snapshot(tmp_path / "snap")
    result = CliRunner().invoke(main, ["--config", os.devnull, "draw", "--snapshot", str(snap)])
    assert result.exit_code == 0, result.output
    by_key, _, legend = drawn(result.stdout)
    assert "fault-affinity" in by_key[SICK] and "fault-affinity" in legend
    assert not any("fault-affinity" in by_key[node] for node in NODES if node != SICK)


def test_health_degrades_the_node_whose_gpu_layout_differs_from_its_type(tmp_path: Path) -> None:
    """gres-layout-differs (one node's GPU6-GPU7 down to NV12) reaches health, as the
    affinity findings do: degraded, nothing drained."""
    snap = snapshot(tmp_path / "snap")
    odd = NODES[1]
    (matrix,) = (snap / "nodes" / odd).glob("*topo*")
    rows = [line.split("\t") for line in matrix.read_text().splitlines()]
    rows[7][8] = rows[8][7] = "NV12"  # row GPU6 column GPU7, row GPU7 column GPU6
    matrix.write_text("\n".join("\t".join(row) for row in rows) + "\n")
    result = health_json(tmp_path, snap)
    assert result.exit_code == Exit.DIFFERS, result.output
    rows_out = {row["node"]: row for row in json.loads(result.stdout)["nodes"]}
    assert rows_out[odd]["verdict"] == "degraded"
    assert [f["kind"] for f in rows_out[odd]["findings"]] == ["gres-layout-differs"]
    assert {rows_out[n]["verdict"] for n in NODES if n not in (odd, SICK)} == {"healthy"}
