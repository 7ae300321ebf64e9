"""``slurm save`` on real Slurm (24.11 and 26.05), then the commands read from the saved state
with no scontrol on PATH: ``occupancy`` and ``explain JOBID`` print what they print live.

8 nodes of 4 fake GPUs in two 4-node blocks (``topology/block``, BlockSizes=4); partition
``gpu`` holds all, ``small`` node01-04. Running: an exclusive job on node01, a 2-GPU job on
node05; pending: an exclusive 4-node job (no block has 4 idle nodes).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec, PartitionSpec

pytestmark = pytest.mark.integration

GPUS, BLOCK = 4, 4
NODES = [f"node{i:02d}" for i in range(1, 2 * BLOCK + 1)]
TOPOLOGY = "BlockName=b0 Nodes=node[01-04]\nBlockName=b1 Nodes=node[05-08]\nBlockSizes=4\n"
SLEEP = "--wrap 'sleep 600'"


def test_the_saved_state_reads_as_the_live_cluster(
    make_cluster: Callable[..., Cluster], shims: Shims, tmp_path: Path
) -> None:
    spec = ClusterSpec(
        nodes=[NodeSpec(name, cpus=GPUS, gpus=GPUS) for name in NODES],
        partitions=(
            PartitionSpec("gpu", default=True),
            PartitionSpec("small", nodes="node[01-04]"),
        ),
        topology_plugin="topology/block",
        topology_conf=TOPOLOGY,
    )
    cluster = make_cluster(spec)
    live = shims(cluster, "scontrol")
    cluster.wait_job(cluster.sbatch(f"--exclusive -N 1 -w node01 {SLEEP}"))
    job = cluster.sbatch(f"-N 1 -n 1 -w node05 --gres=gpu:2 {SLEEP}")
    cluster.wait_job(job)
    cluster.wait_job(cluster.sbatch(f"--exclusive -N {BLOCK} {SLEEP}"), states=("PENDING",))

    def tool(env: dict[str, str], *args: str) -> str:
        argv = ["topograph-slurm", *args]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    state = tmp_path / "state"
    summary = json.loads(tool(live, "slurm", "save", str(state), "--json"))
    assert summary["not_saved"] == [], summary
    assert sorted(p.name for p in state.iterdir()) == sorted(summary["files"])
    # nothing of Slurm on PATH: only the installed tool's venv and the system's directories
    offline = {**live, "PATH": live["PATH"].split(":", 1)[1]}
    assert subprocess.run(["which", "scontrol"], env=offline, check=False).returncode != 0

    for args in (["occupancy", "--json"], ["occupancy"], ["explain", job]):
        assert tool(offline, *args, "--slurm-state", str(state)) == tool(live, *args), args
    assert (
        json.loads(tool(offline, "occupancy", "--json", "--slurm-state", str(state)))["fabric"][
            "pending"
        ]
        == 1
    )
