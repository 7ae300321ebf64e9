"""A node that is off today keeps its place, and real Slurm (24.11, 26.05) can use it.

The last run saw all eight nodes (two leaves of four). Today's dump lacks gpu0008 — powered
down, its HCAs gone from the sweep — while Slurm still lists it (``--slurm-nodes scontrol``
asks the real slurmctld through a shim: only the transport is a stand-in). ``generate`` keeps
gpu0008 under its last leaf; after ``scontrol reconfigure`` slurmctld runs that topology, and a
four-node job on gpu0008 and its leaf neighbours runs. The control: the same dump without
keeping drops gpu0008 from topology.conf, and then Slurm refuses that job.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec, parse_show_topology

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources import sim

pytestmark = pytest.mark.integration

ALL_ON, ONE_OFF = "nodes=8,su=4,rails=2", "nodes=7,su=4,rails=2"
NODES = [f"gpu{i:04d}" for i in range(1, 9)]
LEAF = "leaf-su002-r0"
JOB = "--exclusive -N 4 -w gpu[0005-0008] -J neighbours --wrap 'sleep 120'"


def generate(*args: str) -> tuple[int, dict]:
    """The real CLI with a JSON report; returns (exit code, report)."""
    report = Path(args[args.index("-o") + 1]).with_suffix(".report.json")
    argv = ["--config", os.devnull, "generate", "--format", "tree", *args]
    result = CliRunner().invoke(main, [*argv, "--report", str(report), "--json"])
    assert result.exit_code == Exit.OK, result.output
    return result.exit_code, json.loads(report.read_text())


def test_a_node_off_keeps_its_leaf_and_runs_a_multi_node_job(
    make_cluster: Callable[..., Cluster],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shims: Shims,
) -> None:
    out = tmp_path / "topology.conf"
    generate("--sim", ALL_ON, "-o", str(out))  # the last run: every node on
    spec = ClusterSpec(
        nodes=[NodeSpec(name, cpus=2) for name in NODES],
        topology_plugin="topology/tree",
        topology_conf=out.read_text(),
    )
    cluster = make_cluster(spec)
    monkeypatch.setenv("PATH", shims(cluster, "scontrol")["PATH"])  # the in-process CLI's
    today = tmp_path / "today.txt"
    today.write_text(sim.generate_ibnetdiscover(sim.parse_sim_spec(ONE_OFF)))

    _, report = generate("--ibnetdiscover", str(today), "-o", str(out), "--slurm-nodes", "scontrol")
    kept = [f for f in report["findings"] if f["kind"] == "kept-missing"]
    assert [f["subject"] for f in kept] == ["gpu0008"] and LEAF in kept[0]["message"]
    assert report["missing"] == ["gpu0008"]
    cluster.reconfigure(files={"topology.conf": out.read_text()}, restart=False)
    running = parse_show_topology(cluster.show_topology())
    assert running.leaf_nodes()[LEAF] == NODES[4:]
    job = cluster.sbatch(JOB)
    assert cluster.wait_job(job).nodes == NODES[4:]
    cluster.exec(["scancel", job]).check("scancel")
    cluster.wait_idle()  # a job submitted while nodes complete may be judged later

    dropped = tmp_path / "dropped" / "topology.conf"
    dropped.parent.mkdir()
    generate("--ibnetdiscover", str(today), "-o", str(dropped), "--keep-missing", "0")
    assert "gpu0008" not in dropped.read_text()
    cluster.reconfigure(files={"topology.conf": dropped.read_text()}, restart=False)
    assert "gpu0008" not in parse_show_topology(cluster.show_topology()).leaf_nodes()[LEAF]
    cluster.wait_idle()  # nodes re-registering after reconfigure: sbatch would only queue
    refused = cluster.exec(f"sbatch --parsable {JOB}")
    if refused.rc == 0:  # slurmctld judged it later (a node still registering): it never runs
        time.sleep(5)
        info = cluster.job(refused.stdout.strip())
        assert info.state == "PENDING" and not info.nodes, info
        return
    assert "Requested topology configuration is not available" in refused.stderr
