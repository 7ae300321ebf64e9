"""`pools --format dynamo|srt-slurm|sglang|vllm` and the launcher files `--out` writes: their
content, and the SGLang and vLLM scripts run with a stand-in `srun` and a stand-in server that
record what each instance was started with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "tests/fixtures/real/nvidia-smi-topo/dgx-a100-8gpu-12nic-mlx5-columns.txt"
# two leaves of 8 nodes (gpu0001-0008, gpu0009-0016) under one spine
SIM = "nodes=16,gpus=8,rails=2,su=8"
ALL = "gpu[0001-0016]"
DEPLOYMENT = ["--prefill", "2x4", "--decode", "1x16"]  # two share a node; one spans two


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, "pools", *args])


def plan(*args: str) -> dict[str, Any]:
    result = run("--sim", SIM, "--nodes", ALL, *args, "--json")
    assert result.exit_code == Exit.OK, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_dynamo_names_the_kv_home_level_and_each_nodes_units() -> None:
    result = run("--sim", SIM, "--nodes", ALL, *DEPLOYMENT, "--format", "dynamo")
    assert result.exit_code == Exit.OK, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "KV transfer domain: leaf (required: every leaf holding a prefill instance holds a "
        "decode instance)"
    )
    assert "  leaf-su001-r0: 2, 1" in lines
    node_lines = [ln for ln in lines if ln.startswith("  gpu")]
    assert node_lines[0].endswith("leaf=leaf-su001-r0 spine=spine-001 host=gpu0003")
    assert (
        "  decode-0: DYN_TOPOLOGY_ENABLED=true DYN_TOPOLOGY_MOUNT_PATH=./dynamo/gpu0001 "
        "DYN_KV_TRANSFER_DOMAIN=leaf DYN_KV_TRANSFER_ENFORCEMENT=required" in lines
    )


def test_dynamo_prefers_when_a_leaf_holds_prefill_without_decode() -> None:
    """Fourteen prefill nodes and one decode instance of two nodes: the second leaf holds
    prefill only, where `required` would fail its requests (Dynamo's docs): `preferred`, with
    its weight, and the capacity per leaf says why."""
    args = ["--prefill", "14x8", "--decode", "1x16"]
    result = run("--sim", SIM, "--nodes", ALL, *args, "--format", "dynamo")
    assert result.exit_code == Exit.DIFFERS, result.output  # pairs cross out of their leaf
    lines = result.stdout.splitlines()
    assert lines[0].startswith("KV transfer domain: leaf (preferred: ")
    assert lines[2:4] == ["  leaf-su001-r0: 6, 1", "  leaf-su002-r0: 8, 0"]
    assert result.stdout.count("DYN_KV_TRANSFER_PREFERRED_WEIGHT=0.85") == 15


def test_srt_slurm_fields_are_two_components_of_the_plan() -> None:
    data = plan(*DEPLOYMENT)
    result = run("--sim", SIM, "--nodes", ALL, *DEPLOYMENT, "--format", "srt-slurm")
    assert result.exit_code == Exit.OK, result.output
    body = [ln for ln in result.stdout.splitlines() if not ln.startswith("#")]
    prefill = {n for i in data["instances"] if i["role"] == "prefill" for n in i["nodes"]}
    decode = [n for i in data["instances"] if i["role"] == "decode" for n in i["nodes"]]
    assert body == [
        "resources:",
        "  gpus_per_node: 8",
        f"  prefill_nodes: {len(prefill)}",
        "  prefill_workers: 2",
        "  gpus_per_prefill: 4",
        f"  decode_nodes: {len(decode)}",
        "  decode_workers: 1",
        "  gpus_per_decode: 16",
        "  het_jobs: true",
    ]
    assert f"#   het-group 1 (decode): {','.join(decode)}" in result.stdout


def test_srt_slurm_submit_line_gives_each_component_its_nodes(tmp_path: Path) -> None:
    out = tmp_path / "serve"
    data = plan(*DEPLOYMENT, "--out-dir", str(out))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text('#!/bin/sh\nfor arg in "$@"; do echo "$arg"; done\n')
    (bin_dir / "sbatch").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    argv = subprocess.run(
        ["sh", str(out / "srt-slurm.sh"), "job.sh"], env=env, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    components = " ".join(argv[:-1]).split(" : ")
    for component, role in zip(components, ("prefill", "decode"), strict=True):
        nodes = list(dict.fromkeys(
            n for i in data["instances"] if i["role"] == role for n in i["nodes"]
        ))  # fmt: skip
        assert component.split() == [f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}"]
    assert argv[-1] == "job.sh"


STAND_IN_SRUN = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
nodes = []
while args[0].startswith("--"):
    flag = args.pop(0)
    if flag.startswith("--nodelist="):
        nodes = flag.split("=", 1)[1].split(",")
# Slurm numbers a step's nodes in its own order: the script must not rely on SLURM_NODEID
for node_id, node in enumerate(reversed(nodes)):
    env = dict(os.environ, SLURMD_NODENAME=node, SLURM_NODEID=str(node_id))
    subprocess.run(args, env=env, check=True)
"""

RECORDER = """#!{python}
import json, os, sys
keep = ("CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "UCX_NET_DEVICES", "TOPOGRAPH_PEERS",
        "TOPOGRAPH_INSTANCE", "SLURMD_NODENAME", "VLLM_NIXL_SIDE_CHANNEL_HOST")
env = {{k: v for k, v in os.environ.items() if k in keep or k.startswith("DYN_")}}
who = env.get("TOPOGRAPH_INSTANCE", "router"), env.get("SLURMD_NODENAME", "-"), os.getpid()
name = ".".join(map(str, who))
with open(os.path.join(os.environ["RECORDS"], name + ".json"), "w") as out:
    json.dump({{"argv": sys.argv[1:], "env": env}}, out)
"""


def stand_ins(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose `srun` runs the command once per node of --nodelist, and a `recorder` that
    writes each process's argv and environment into RECORDS."""
    bin_dir, records = tmp_path / "bin", tmp_path / "records"
    bin_dir.mkdir()
    records.mkdir()
    for name, text in (("srun", STAND_IN_SRUN), ("recorder", RECORDER)):
        (bin_dir / name).write_text(text.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORDS": str(records)}
    return env, records


def recorded(records: Path) -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for path in records.iterdir():
        instance, node, _ = path.stem.rsplit(".", 2)
        found[instance, node] = json.loads(path.read_text())
    return found


def nics_of(instance: str) -> list[str]:
    """The instance's NICs as `pools --format binding-env` binds its ranks, in rank order."""
    result = run("--sim", SIM, "--nodes", ALL, *DEPLOYMENT, "--topo-matrix", str(TOPO),
                 "--format", "binding-env")  # fmt: skip
    nics: list[str] = []
    mine = False
    for line in result.stdout.splitlines():
        if line.startswith("# ") and (" (prefill, " in line or " (decode, " in line):
            mine = line.startswith(f"# {instance} ")
        elif mine and "NCCL_IB_HCA==" in line:
            value = line.split("NCCL_IB_HCA==")[1].split()[0]
            nics += [nic for nic in value.split(",") if nic not in nics]
    return nics


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_each_instance_runs_on_its_gpus_nics_peers_and_domain(tmp_path: Path, engine: str) -> None:
    out = tmp_path / "serve"
    data = plan(*DEPLOYMENT, "--topo-matrix", str(TOPO), "--out-dir", str(out))
    env, records = stand_ins(tmp_path)
    env |= {
        f"TOPOGRAPH_{engine.upper()}": "recorder",
        "TOPOGRAPH_SGLANG_ROUTER": "recorder",
        "TOPOGRAPH_VLLM_PROXY": "recorder",
        "MODEL": "deepseek-ai/DeepSeek-V3",
        f"{engine.upper()}_DECODE_ARGS": "--decode-only 1",
    }
    subprocess.run(["sh", str(out / f"{engine}.sh")], env=env, check=True, timeout=60)
    seen = recorded(records)
    heads = {i["name"]: i["nodes"][0] for i in data["instances"]}
    for one in data["instances"]:
        for rank, node in enumerate(one["nodes"]):
            got = seen.pop((one["name"], node))
            assert got["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, one["gpus"]))
            assert got["env"]["NCCL_IB_HCA"] == "=" + ",".join(nics_of(one["name"]))
            peers = got["env"]["TOPOGRAPH_PEERS"].split(",")
            assert [peer.split(":")[0] for peer in peers] == [heads[p] for p in one["pairs"]]
            mount = Path(got["env"]["DYN_TOPOLOGY_MOUNT_PATH"])
            assert mount == out / "dynamo" / one["nodes"][0]
            assert got["env"]["DYN_KV_TRANSFER_DOMAIN"] == "leaf"
            for pair in one["pairs"]:  # required: a pair shares its leaf
                assert (out / "dynamo" / heads[pair] / "leaf").read_text() == (
                    mount / "leaf"
                ).read_text()
            argv = got["argv"]
            if len(one["nodes"]) > 1:
                assert argv[argv.index("--node-rank") + 1] == str(rank)
                head_flag = "--dist-init-addr" if engine == "sglang" else "--master-addr"
                assert argv[argv.index(head_flag) + 1].split(":")[0] == one["nodes"][0]
            tp_flag = "--tp-size" if engine == "sglang" else "--tensor-parallel-size"
            assert argv[argv.index(tp_flag) + 1] == str(one["tp"])
            assert ("--decode-only" in argv) == (one["role"] == "decode")
            if engine == "sglang":
                assert argv[argv.index("--disaggregation-mode") + 1] == one["role"]
    routers = [got for (name, _), got in seen.items() if name == "router"]
    assert len(routers) == sum(1 for i in data["instances"] if i["role"] == "decode")
    assert len(seen) == len(routers)  # no process but the instances' and the routers'


def test_without_a_topo_matrix_the_scripts_bind_gpus_only() -> None:
    result = run("--sim", SIM, "--nodes", ALL, *DEPLOYMENT, "--format", "sglang")
    assert result.exit_code == Exit.OK, result.output
    assert "NCCL_IB_HCA" not in result.stdout and "--disaggregation-ib-device" not in result.stdout
    assert "  export CUDA_VISIBLE_DEVICES=4,5,6,7\n" in result.stdout


def test_out_with_a_foreign_file_in_dynamo_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "serve"
    plan(*DEPLOYMENT, "--out-dir", str(out))
    node = next((out / "dynamo").iterdir())
    (node / "notes").write_text("mine\n")
    result = run("--sim", SIM, "--nodes", ALL, *DEPLOYMENT, "--out-dir", str(out))
    assert result.exit_code == Exit.OUTPUT, result.output
    assert (node / "notes").read_text() == "mine\n"


def test_srt_slurm_says_when_its_workers_are_not_pools_instances() -> None:
    """srt-slurm fills each component's nodes in Slurm's (name) order: instances listed
    against that order are not the workers it forms, and the recipe says so."""
    from topograph_slurm.analysis.placement.span import fabric_map
    from topograph_slurm.model.pools import Deployment, Instance, PoolPlan, PoolSize
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.serving import render_serving, serving_context

    def deployment(prefill_nodes: list[str]) -> str:
        instances = [
            Instance("prefill", f"prefill-{k}", 8, [node], list(range(8)), "node", "node")
            for k, node in enumerate(prefill_nodes)
        ]
        instances.append(
            Instance("decode", "decode-0", 8, ["gpu0001"], list(range(8)), "node", "node")
        )
        plan = PoolPlan(
            Deployment(PoolSize(2, 8), PoolSize(1, 8)), 8, ["node", "fabric"], instances, []
        )
        context = serving_context(plan, fabric_map(None), None, ".")
        return render_serving(environment(None), context, "srt-slurm")

    assert "not pools' instances" not in deployment(["gpu0002", "gpu0003"])
    assert "so its\n# workers are not pools' instances" in deployment(["gpu0003", "gpu0002"])
