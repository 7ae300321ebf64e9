"""``pools --out``'s launcher files on real Slurm (24.11 and 26.05): the SGLang script run as
the heterogeneous job's batch script with a stand-in server that prints what each instance was
started with, and srt-slurm's two-component submit line, with what Slurm reports in each
component's ``SLURM_JOB_NODELIST_HET_GROUP_<n>``.

Four nodes of 4 fake GPUs named as a simulated fabric's hosts (two leaves of two nodes, two
rails); topograph-slurm runs on the host (the shipped wheel), the files are copied into every
container, and the jobs are submitted in the controller.

1. ``sglang.sh`` in ``hetjob.sh``'s job: every instance's process, on each of its nodes, sees
   exactly its GPUs, the NICs its GPUs' topo -m gives, its peers' addresses, a Dynamo mount
   whose transfer-domain file holds the unit its peers' hold, and its node rank; one router
   per decode instance.
2. ``srt-slurm.sh`` submits a job script with two components of its own (as srtctl writes
   one): each component runs on its nodes, ``SLURM_HET_SIZE`` is 2.
3. ``--nodelist`` in reverse name order: Slurm reports the component's nodes in its node
   order (docs/pools.md says so).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.sources.sim import SimSpec, generate_ibnetdiscover

pytestmark = pytest.mark.integration

TOPO_4GPU = (
    Path(__file__).parents[1] / "fixtures/real/nvidia-smi-topo/gb200-4gpu-8nic-grace-openshift.txt"
)
SIM = SimSpec(nodes=4, gpus=4, rails=2, su=2, tiers=2, prefix="node")
NODES = [SIM.node_name(i) for i in range(SIM.nodes)]
SERVE = "/tmp/serve"

# the stand-in server and router: one line each on the batch script's output
RECORDER = """#!/bin/sh
domain=
[ -n "${DYN_KV_TRANSFER_DOMAIN:-}" ] &&
  domain=$(cat "$DYN_TOPOLOGY_MOUNT_PATH/$DYN_KV_TRANSFER_DOMAIN")
echo "REC ${TOPOGRAPH_INSTANCE:-router} ${SLURMD_NODENAME:--} ${CUDA_VISIBLE_DEVICES:--}" \
  "${NCCL_IB_HCA:--} ${TOPOGRAPH_PEERS:--} ${DYN_KV_TRANSFER_DOMAIN:--}=$domain $*"
"""
RUN = f"""#!/bin/sh
export MODEL=stand-in TOPOGRAPH_SGLANG=/tmp/recorder TOPOGRAPH_SGLANG_ROUTER=/tmp/recorder
exec sh {SERVE}/sglang.sh
"""
PROBE = """#!/bin/sh
#SBATCH --nodes=1
#SBATCH hetjob
#SBATCH --nodes=1
echo "SIZE=$SLURM_HET_SIZE G0=$SLURM_JOB_NODELIST_HET_GROUP_0 G1=$SLURM_JOB_NODELIST_HET_GROUP_1"
"""


def test_launchers_on_real_slurm(
    make_cluster: Callable[..., Cluster], host_env: dict[str, str], tmp_path: Path
) -> None:
    cluster = make_cluster(
        ClusterSpec(nodes=[NodeSpec(n, cpus=SIM.gpus, gpus=SIM.gpus) for n in NODES])
    )
    fabric = tmp_path / "fabric.txt"
    fabric.write_text(generate_ibnetdiscover(SIM))
    out = tmp_path / "serve"
    argv = ["topograph-slurm", "pools", "--ibnetdiscover", str(fabric), "--nodes", ",".join(NODES)]
    argv += ["--gpus-per-node", "4", "--prefill", "2x2", "--decode", "1x8", "--json"]
    argv += ["--topo-matrix", str(TOPO_4GPU), "--out-dir", str(out)]
    done = subprocess.run(argv, env=host_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    files = {
        str(path.relative_to(tmp_path)): path.read_text()
        for path in out.rglob("*")
        if path.is_file()
    }
    files |= {"recorder": RECORDER, "run.sh": RUN, "probe.sh": PROBE}
    cluster.write_files(files, "/tmp")
    cluster.exec(["chmod", "755", "/tmp/recorder"]).check("chmod")
    for node in NODES:
        cluster.exec(["chmod", "755", "/tmp/recorder"], node=node).check("chmod")
    bound = subprocess.run(
        [*argv[: argv.index("--json")], "--topo-matrix", str(TOPO_4GPU), "--format", "binding-env"],
        env=host_env, capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip

    def submit(*args: str) -> str:
        run = cluster.exec(["sh", *args]).check("submit")
        return run.stdout.strip().split(";")[0]

    # 1. the SGLang script as the heterogeneous job's batch script
    het = submit(f"{SERVE}/hetjob.sh", "--parsable", "--output=/tmp/serve.out", "/tmp/run.sh")
    cluster.wait_job(het, ("COMPLETED",), timeout=120)
    batch_node = plan["instances"][0]["nodes"][0]
    lines = cluster.exec(["cat", "/tmp/serve.out"], node=batch_node).check().stdout.splitlines()
    seen = {tuple(ln.split()[1:3]): ln.split()[3:] for ln in lines if ln.startswith("REC ")}
    heads = {i["name"]: i["nodes"][0] for i in plan["instances"]}
    for one in plan["instances"]:
        nics = _nics(bound, one["name"])
        for rank, node in enumerate(one["nodes"]):
            gpus, hca, peers, domain, *server = seen.pop((one["name"], node))
            assert gpus == ",".join(map(str, one["gpus"])), (one["name"], node)
            assert hca == "=" + ",".join(nics), (one["name"], node)
            assert [p.split(":")[0] for p in peers.split(",")] == [heads[p] for p in one["pairs"]]
            name, _, value = domain.partition("=")  # what the nodes' domain files say
            assert value == (out / "dynamo" / one["nodes"][0] / name).read_text().strip()
            for pair in one["pairs"]:  # required: a pair shares the unit
                assert value == (out / "dynamo" / heads[pair] / name).read_text().strip()
            if len(one["nodes"]) > 1:
                assert server[server.index("--node-rank") + 1] == str(rank)
    routers = [key for key in seen if key[0] == "router"]
    assert len(routers) == 1 and len(seen) == 1, seen

    # 2. srt-slurm's job script submitted as its two components, each on its nodes
    srt = submit(f"{SERVE}/srt-slurm.sh", "--parsable", "--output=/tmp/srt.out", "/tmp/probe.sh")
    cluster.wait_job(srt, ("COMPLETED",), timeout=120)
    roles = {
        role: [n for i in plan["instances"] if i["role"] == role for n in i["nodes"]]
        for role in ("prefill", "decode")
    }
    said = _groups(cluster, "/tmp/srt.out", roles["prefill"][0])
    slurm_order = {role: [n for n in NODES if n in nodes] for role, nodes in roles.items()}
    assert said == ("2", slurm_order["prefill"], slurm_order["decode"]), said

    # 3. a component's node list in Slurm's order, not --nodelist's
    reverse = ",".join(reversed(NODES[:2]))
    probe = submit(
        "-c",
        f"sbatch --parsable --output=/tmp/probe.out --nodes=2 --nodelist={reverse} : "
        f"--nodes=1 --nodelist={NODES[3]} /tmp/probe.sh",
    )
    cluster.wait_job(probe, ("COMPLETED",), timeout=120)
    assert _groups(cluster, "/tmp/probe.out", NODES[0]) == ("2", NODES[:2], [NODES[3]])


def _groups(cluster: Cluster, output: str, node: str) -> tuple[str, list[str], list[str]]:
    """The probe's SLURM_HET_SIZE and each component's node list, expanded in its order."""
    said = dict(
        word.split("=", 1)
        for word in cluster.exec(["cat", output], node=node).check().stdout.split()
    )
    groups = [
        cluster.exec(["scontrol", "show", "hostnames", said[g]]).check().stdout.split()
        for g in ("G0", "G1")
    ]
    return said["SIZE"], groups[0], groups[1]


def _nics(bound: str, instance: str) -> list[str]:
    """The instance's NICs as `pools --format binding-env` binds its ranks, in rank order."""
    nics: list[str] = []
    mine = False
    for line in bound.splitlines():
        if line.startswith("# ") and (" (prefill, " in line or " (decode, " in line):
            mine = line.startswith(f"# {instance} ")
        elif mine and "NCCL_IB_HCA==" in line:
            value = line.split("NCCL_IB_HCA==")[1].split()[0]
            nics += [nic for nic in value.split(",") if nic not in nics]
    return nics
