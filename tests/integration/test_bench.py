"""``bench`` through the real ``srun`` of Slurm 24.11 and 26.05.

Nine nodes (2 fake GPUs each) under a simulated fabric of three 3-node leaves under one
spine (``--sim``, node names as the cluster's). Every node carries a fake ``all_reduce_perf``
(``tests/support/nccl_fake``) that replays a recorded real nccl-tests output, scaled per step
by a planted slow node (bn0002, slow with every partner) and a planted slow leaf uplink (the
third leaf: slow on every pair that leaves it). The tool runs on the host inside one real
allocation (an ``sbatch`` holding all nine nodes): a ``srun`` shim on PATH execs the
controller's real srun with the job id, and forwards SIGTERM to it (a timed-out step is
cancelled in the cluster, not only on the host).

1. The whole plan runs as real job steps; ``bench`` finds exactly the planted node and
   uplink, and records plan, command lines, timings and versions in the snapshot.
2. A hung run (the fake sleeps) is killed at its timeout, recorded as timed out, and its
   process is gone from the node.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

from tests.conftest import real_fixture
from tests.support.nccl_fake import CAPTURE, fake_nccl_tests, scale_table
from topograph_slurm.sources.snapshot import load_bench, load_snapshot

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SIM = "nodes=9,gpus=2,rails=8,su=3,tiers=2,prefix=bn"
NODES = [f"bn{i:04d}" for i in range(1, 10)]
GPUS = 2
SLOW_NODE, LEAF3 = "bn0002", NODES[6:]
BINARY = "/usr/local/bin/all_reduce_perf"


def install(cluster: Cluster, table: str) -> None:
    script = fake_nccl_tests(real_fixture(CAPTURE).read_text(encoding="utf-8"), table)
    for node in NODES:
        cluster.put_file(node, BINARY, script, mode=0o755)


def launcher(cluster: Cluster) -> str:
    """``--mpi=pmix`` where the cluster's srun has it (the default on real clusters), else
    the MPI plugin it has: the fake needs none."""
    plugins = cluster.exec("srun --mpi=list").check("srun --mpi=list")
    listed = plugins.stdout + plugins.stderr
    return "srun --mpi=pmix" if "pmix" in listed else "srun --mpi=none"


def bench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["topograph-slurm", "--config", os.devnull, "bench", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=900,
    )


def test_bench_finds_the_planted_node_and_uplink_through_real_srun(
    make_cluster: Callable[..., Cluster], tmp_path: Path, slurm_version: str, shims: Shims
) -> None:
    cluster = make_cluster(ClusterSpec(nodes=[NodeSpec(n, cpus=4, gpus=GPUS) for n in NODES]))
    install(cluster, scale_table({SLOW_NODE: 0.4}, [(0.5, LEAF3)]))
    job = cluster.sbatch(f"--exclusive -N {len(NODES)} --gres=gpu:{GPUS} --wrap 'sleep 900'")
    cluster.wait_job(job)
    # srun steps in that allocation; a timed-out step's SIGTERM reaches the real srun
    srun = shims(cluster, "srun", env=["SLURM_JOB_ID"])
    env = {**srun, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": "bn[0001-0009]"}
    run = launcher(cluster)
    common = ["--sim", SIM, "--launcher", run, "--binary", BINARY, "--args", "-b 1M -e 8G -f 2"]

    done = bench(env, *common, "--out-dir", str(tmp_path / "snap"))
    assert done.returncode == 1, done.stderr + done.stdout
    record = load_snapshot(tmp_path / "snap").bench
    assert record is not None
    assert [(f.kind, f.subject, f.nodes) for f in record.findings] == [
        ("slow-node", SLOW_NODE, ()),
        ("slow-link", "leaf-su003-r0", tuple(LEAF3)),
    ], done.stdout
    data = record.data
    assert data["slurm"] == cluster.exec("srun --version").stdout.strip()
    assert data["slurm"].split()[-1].startswith(f"{slurm_version}.")
    results = data["results"]
    assert len(results) == 27 and all(r["exit_code"] == 0 and not r["error"] for r in results)
    first = results[0]
    assert first["argv"] == [
        *run.split(),
        "--nodes=1",
        f"--ntasks={GPUS}",
        f"--ntasks-per-node={GPUS}",
        "--nodelist=bn0001",
        "--kill-on-bad-exit=1",
        BINARY,
        "-b",
        "1M",
        "-e",
        "8G",
        "-f",
        "2",
    ]
    assert first["busbw"] == 338.82 and first["started"] and first["duration"] > 0
    assert {lvl["level"]: lvl["median"] for lvl in data["levels"]} == {
        "node": 338.82,
        "leaf": 338.82,
        "spine-1": 169.41,
    }
    # same-round steps ran side by side: the sweep took less than its steps one after another
    assert data["duration"] < sum(r["duration"] for r in results)
    print(done.stdout)

    install(cluster, scale_table(hang=["bn0005"]))
    hung = bench(
        env,
        *common,
        "--levels",
        "node",
        "--nodes",
        "bn[0004-0006]",
        "--timeout",
        "3",
        "--json",
    )
    assert hung.returncode == 1, hung.stderr
    out = json.loads(hung.stdout)
    by_node = {r["nodes"][0]: r for r in out["results"]}
    assert by_node["bn0005"]["timed_out"] and by_node["bn0005"]["exit_code"] is None
    assert by_node["bn0005"]["error"] == "timed out after 3 s (killed)"
    assert by_node["bn0004"]["busbw"] == by_node["bn0006"]["busbw"] == 338.82
    assert [(f["kind"], f["subject"]) for f in out["findings"]] == [("slow-node", "bn0005")]
    deadline = time.monotonic() + 30
    while cluster.exec(["pgrep", "-x", "sleep"], node="bn0005").rc == 0:
        assert time.monotonic() < deadline, "the hung step still runs on bn0005"
        time.sleep(1)
    assert load_bench(tmp_path / "snap").findings == record.findings
