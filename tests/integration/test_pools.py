"""``topograph-slurm pools`` on real Slurm (24.11 and 26.05): a running job's allocation split
into prefill and decode pools, the hostfiles and the heterogeneous job it writes, and
``--apply``'s pool features used by ``sbatch --constraint``.

Eight nodes of 4 fake GPUs named as a simulated fabric's hosts (2 leaves of 4 nodes, 2 rails);
the tool reads that fabric's real ibnetdiscover text with node0001's first cable trained down
to 1x (``degraded=1``). node0002 carries an admin's feature from slurm.conf. topograph-slurm
runs on the host; ``scontrol`` and ``sbatch`` shims exec the controller's real ones.

1. ``pools JOBID`` for an 8-node job, 4 prefill and 2 decode instances of TP 4: one decode in
   each leaf, neither on node0001, each with its prefills in its own leaf; ``--apply`` labels
   exactly the pool nodes, keeping the admin's feature.
2. A second ``--apply`` runs nothing; ``sbatch --constraint=topo_pool_decode`` lands on the
   decode nodes, ``topo_pool_prefill`` on the prefill nodes.
3. ``--out-dir``'s ``hetjob.sh`` submits one heterogeneous job whose components run on the
   instances' nodes.
4. Another deployment, of the partition's nodes (``--partition``), moves the labels: nodes
   that left the pools lose their pool feature.
5. Instances smaller than a node (TP 2 on 4 GPUs): two of one role share a node and a hetjob
   component; in it, each instance runs as its own ``srun --overlap`` step at the same time
   through ``--format binding-wrapper``'s script, every task on its instance's own GPU.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.sources.sim import SimSpec, generate_ibnetdiscover

TOPO_4GPU = (
    Path(__file__).parents[1] / "fixtures/real/nvidia-smi-topo/gb200-4gpu-8nic-grace-openshift.txt"
)

pytestmark = pytest.mark.integration

SIM = SimSpec(nodes=8, gpus=4, rails=2, su=4, tiers=2, prefix="node")
NODES = [SIM.node_name(i) for i in range(SIM.nodes)]
SLOW, ADMIN = "node0001", "node0002"
LEAF1 = set(NODES[:4])


def features(cluster: Cluster) -> dict[str, list[str]]:
    out = json.loads(cluster.exec(["scontrol", "show", "nodes", "--json"]).check().stdout)
    return {n["name"]: sorted(n["features"]) for n in out["nodes"]}


def test_pools_on_real_slurm(
    make_cluster: Callable[..., Cluster], slurm_version: str, tmp_path: Path, shims: Shims
) -> None:
    spec = ClusterSpec(
        nodes=[
            NodeSpec(n, cpus=SIM.gpus, gpus=SIM.gpus, features=("admin_a",) if n == ADMIN else ())
            for n in NODES
        ]
    )
    cluster = make_cluster(spec)
    env = shims(cluster, "scontrol", "sbatch")
    fabric = tmp_path / "fabric.txt"
    fabric.write_text(generate_ibnetdiscover(replace(SIM, degraded=1)))
    out = tmp_path / "serve"

    def pools(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["topograph-slurm", "pools", "--ibnetdiscover", str(fabric)]
        return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=300)

    # 1. a running job's allocation split into pools, and labelled
    holder = cluster.sbatch(f"--exclusive -N 8 --gres=gpu:{SIM.gpus} --wrap 'sleep 600'")
    cluster.wait_job(holder)
    split = pools(
        holder, "--prefill", "4x4", "--decode", "2x4", "--json", "--out-dir", str(out), "--apply"
    )
    assert split.returncode == 0, split.stderr
    plan = json.loads(split.stdout)
    role: dict[str, list[str]] = {"prefill": [], "decode": []}
    for instance in plan["instances"]:
        role[instance["role"]] += instance["nodes"]
    decode, prefill = sorted(role["decode"]), sorted(role["prefill"])
    assert len(decode) == 2 and SLOW not in decode
    assert len(decode_in_leaf1 := LEAF1 & set(decode)) == 1, decode_in_leaf1
    assert {path["level"] for path in plan["kv_paths"]} == {"leaf"}
    held = features(cluster)
    for node in NODES:
        ours = [f"topo_pool_{r}" for r, members in role.items() if node in members]
        assert held[node] == sorted(ours + (["admin_a"] if node == ADMIN else [])), node

    # 2. idempotent (the dry run, asking Slurm, lists nothing to change), and the labels schedule
    dry = pools(holder, "--prefill", "4x4", "--decode", "2x4")
    assert dry.returncode == 0, dry.stderr
    assert "Slurm features (a dry run: --apply runs these):\n  none: every node" in dry.stdout
    again = pools(holder, "--prefill", "4x4", "--decode", "2x4", "--apply")
    assert again.returncode == 0 and "applied:" not in again.stderr, again.stderr
    cluster.exec(["scancel", holder]).check("scancel")
    cluster.wait_idle(timeout=120)
    job = cluster.sbatch("-N 2 --constraint=topo_pool_decode --wrap 'sleep 1'")
    assert cluster.wait_job(job, ("COMPLETED",)).nodes == decode
    job = cluster.sbatch("-N 4 --constraint=topo_pool_prefill --wrap 'sleep 1'")
    assert cluster.wait_job(job, ("COMPLETED",)).nodes == prefill

    def submit_hetjob(directory: Path, *sbatch: str) -> str:
        argv = ["sh", str(directory / "hetjob.sh"), "--parsable", *sbatch]
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return run.stdout.strip().split(";")[0]

    # 3. the heterogeneous job, one component per instance on its nodes
    het = submit_hetjob(out, "--wrap", "sleep 1")
    cluster.wait_job(het, ("COMPLETED", "RUNNING"))
    shown = cluster.exec(["scontrol", "show", "job", het, "--json"]).check().stdout
    components: list[dict[str, Any]] = json.loads(shown)["jobs"]
    assert len(components) == len(plan["instances"])
    by_offset = {c["het_job_offset"]["number"]: c["nodes"] for c in components}
    for offset, instance in enumerate(plan["instances"]):
        assert by_offset[offset] == ",".join(instance["nodes"]), (offset, by_offset)

    # 4. another deployment moves the labels
    moved = pools(
        "--partition",
        "debug",
        "--gpus-per-node",
        "4",
        "--prefill",
        "2x4",
        "--decode",
        "1x4",
        "--apply",
    )
    assert moved.returncode == 0, moved.stderr
    now = features(cluster)
    labelled = {node for node, held in now.items() if set(held) - {"admin_a"}}
    assert len(labelled) == 3 and SLOW not in labelled
    assert "admin_a" in now[ADMIN]

    # 5. instances sharing a node: one component, a step each, each task on its own GPU
    deployment = ["--partition", "debug", "--gpus-per-node", "4", "--prefill", "4x2"]
    deployment += ["--decode", "2x2"]
    shared = pools(*deployment, "--json", "--out-dir", str(tmp_path / "shared"))
    assert shared.returncode == 0, shared.stderr
    instances = json.loads(shared.stdout)["instances"]
    bound = pools(*deployment, "--format", "binding-wrapper", "--topo-matrix", str(TOPO_4GPU))
    assert bound.returncode == 0, bound.stderr
    groups = list(dict.fromkeys(tuple(i["nodes"]) for i in instances))
    assert len(groups) == 3  # two prefill nodes, one decode node, two instances on each
    steps = ["#!/bin/sh"]
    for i in instances:
        show = f'echo "{i["name"]} $SLURM_LOCALID $CUDA_VISIBLE_DEVICES $SLURMD_NODENAME"'
        steps.append(
            f"srun --het-group={groups.index(tuple(i['nodes']))} --overlap --ntasks-per-node="
            f"{len(i['gpus'])} sh /tmp/bind.sh {i['name']} sh -c '{show}' &"
        )
    steps.append("wait")
    cluster.write_files({"bind.sh": bound.stdout, "steps.sh": "\n".join(steps) + "\n"}, "/tmp")
    het = submit_hetjob(
        tmp_path / "shared", "--output=/tmp/steps.out", "--wrap", "sh /tmp/steps.sh"
    )
    cluster.wait_job(het, ("COMPLETED",))
    seen = cluster.exec(["cat", "/tmp/steps.out"], node=groups[0][0]).check().stdout.split("\n")
    got = sorted(line for line in seen if line)
    want = sorted(
        f"{i['name']} {rank} {gpu} {i['nodes'][0]}" for i in instances for rank, gpu in
        enumerate(i["gpus"])
    )  # fmt: skip
    assert got == want, seen
