"""``topograph-slurm experts JOBID`` on real Slurm (24.11 and 26.05): the GPUs EPLB's plan is
laid on are a running job's, in the order Slurm ranks its nodes.

Four nodes of 4 fake GPUs named as a simulated fabric's hosts (one leaf); a 4-node job holds
them. ``experts`` reads the job with ``scontrol show job --json`` (a shim execs the
controller's real scontrol) and the fabric from its ibnetdiscover text; each server is
EPLB's "node" there (no multi-node NVLink domain). The plan must put every slot on the job's
GPUs (host and local rank from Slurm's allocation) and be the one the same nodes given by name
get.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.sources.sim import SimSpec, generate_ibnetdiscover

pytestmark = pytest.mark.integration

SIM = SimSpec(nodes=4, gpus=4, rails=1, su=4, tiers=2, prefix="node")
NODES = [SIM.node_name(i) for i in range(SIM.nodes)]
#: EPLB's published example's loads: 2 layers of 12 logical experts.
LOADS = [
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
]


def test_experts_for_a_running_job(
    make_cluster: Callable[..., Cluster], slurm_version: str, tmp_path: Path, shims: Shims
) -> None:
    cluster = make_cluster(
        ClusterSpec(nodes=[NodeSpec(n, cpus=SIM.gpus, gpus=SIM.gpus) for n in NODES])
    )
    env = shims(cluster, "scontrol")
    fabric = tmp_path / "fabric.txt"
    fabric.write_text(generate_ibnetdiscover(SIM))
    loads = tmp_path / "loads.json"
    loads.write_text(json.dumps(LOADS))

    def experts(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["topograph-slurm", "experts", "--ibnetdiscover", str(fabric)]
        common = ["--loads", str(loads), "--replicas", "32", "--groups", "4", "--json"]
        return subprocess.run(
            [*argv, *args, *common], env=env, capture_output=True, text=True, timeout=300
        )

    job = cluster.sbatch(f"--exclusive -N 4 --gres=gpu:{SIM.gpus} --wrap 'sleep 600'")
    placed = cluster.wait_job(job).nodes
    from_job = experts(job)
    assert from_job.returncode == 0, from_job.stderr
    plan = json.loads(from_job.stdout)
    assert plan["ranks_from"].startswith(f"job {job}")
    assert plan["policy"] == "hierarchical" and plan["domain_kind"] == "node"
    gpus = plan["gpus"]
    assert [g["host"] for g in gpus] == [n for n in placed for _ in range(SIM.gpus)]
    assert [g["local_rank"] for g in gpus] == list(range(SIM.gpus)) * len(placed)
    for layer in plan["layers"]:
        assert len(layer["physical_to_logical"]) == 32
        assert sorted(set(layer["physical_to_logical"])) == list(range(12))
    by_name = experts("--nodes", ",".join(placed), "--gpus-per-node", str(SIM.gpus))
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["layers"] == plan["layers"]
