"""``topograph-slurm occupancy`` on real Slurm (24.11 and 26.05): a job stream that fragments
the blocks, and the stranded GPUs it leaves for a job that pends.

12 nodes of 4 fake GPUs in three 4-node blocks (b0 node01-04, b1 node05-08, b2 node09-12,
``topology/block``, BlockSizes=4); partition ``gpu`` holds all, ``small`` node01-04.
topograph-slurm runs on the host with a ``scontrol`` shim and reads the topology slurmctld
runs (``scontrol show topology``).

The stream: one exclusive 1-node job on the first node of every block (node01, node05, node09),
a 2-GPU job on node02, node12 drained. Then ``--exclusive -N 4`` pends: no block has 4 idle
nodes (b0 2, b1 3, b2 2). Free GPUs: b0 2+4+4 = 10, b1 12, b2 8 (node12 down): 30, all of it
stranded, since the only pending job fits in no block; in ``small`` nothing pends, nothing is
stranded. The largest TP group placeable now: b1's three idle nodes, 12 GPUs. ``draw
--occupancy`` colours every node with free GPUs stranded.

Then a held ``-N 4 --segment=2`` job pends too: every block has 2 idle nodes, so on 26.05
(whose ``show jobs --json`` prints ``segment_size``) nothing is stranded; 24.11 does not print
the segment, the job reads as 4 nodes in one block, and the 30 GPUs stay stranded.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec, PartitionSpec

pytestmark = pytest.mark.integration

GPUS, BLOCK, BLOCKS = 4, 4, 3
SLEEP = "--wrap 'sleep 600'"
NODES = [f"node{i:02d}" for i in range(1, BLOCK * BLOCKS + 1)]
TOPOLOGY = (
    "\n".join(
        f"BlockName=b{b} Nodes={','.join(NODES[b * BLOCK : (b + 1) * BLOCK])}"
        for b in range(BLOCKS)
    )
    + f"\nBlockSizes={BLOCK}\n"
)


def test_a_fragmenting_stream_strands_the_gpus_a_pending_job_cannot_use(
    make_cluster: Callable[..., Cluster], shims: Shims, slurm_version: str
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
    env = shims(cluster, "scontrol")
    for name in ("node01", "node05", "node09"):
        cluster.wait_job(cluster.sbatch(f"--exclusive -N 1 -w {name} {SLEEP}"))
    cluster.wait_job(cluster.sbatch(f"-N 1 -n 1 -w node02 --gres=gpu:2 {SLEEP}"))
    cluster.exec("scontrol update nodename=node12 state=drain reason=occupancy-test").check()
    pending = cluster.sbatch(f"--exclusive -N {BLOCK} {SLEEP}")
    cluster.wait_job(pending, states=("PENDING",))

    def tool(*args: str) -> str:
        argv = ["topograph-slurm", *args]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    data = json.loads(tool("occupancy", "--json"))
    fabric = data["fabric"]
    units = {unit["name"]: unit for unit in fabric["units"]}
    assert {name: (u["busy"], u["free"], u["down"]) for name, u in units.items()} == {
        "b0": (6, 10, 0),
        "b1": (4, 12, 0),
        "b2": (4, 8, 4),
    }, fabric
    assert fabric["stranded"] == 30 and fabric["pending"] == 1, fabric
    assert fabric["largest_tp"] == 12, fabric
    assert data["partitions"]["small"]["stranded"] == 0, data["partitions"]
    assert data["partitions"]["gpu"]["stranded"] == 30, data["partitions"]

    drawn = tool("draw", "--occupancy")
    found = re.findall(r'class="node occ-stranded[^"]*"[^>]*data-key="(\w+)"', drawn)
    assert sorted(found) == [f"node{i:02d}" for i in (2, 3, 4, 6, 7, 8, 10, 11)], found

    cluster.sbatch(f"--hold --exclusive -N {BLOCK} --segment=2 {SLEEP}")
    segmented = json.loads(tool("occupancy", "--json"))["fabric"]
    assert segmented["pending"] == 2, segmented
    assert segmented["stranded"] == (0 if slurm_version == "26.05" else 30), segmented
