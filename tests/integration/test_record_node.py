"""The job record's node side on real Slurm (24.11, 26.05): Prolog, Epilog and TaskProlog run
`topograph-slurm record node-start|node-end|task`, PrologSlurmctld `record start` (the
package copied into every container,
``ClusterSpec(tool=True)``), writing to /shared/records, one volume every container mounts as
a cluster's NFS would.

Each node has a fake InfiniBand sysfs tree laid out from the real prints
(tests/support/ib_sysfs.py). A job runs on both nodes; while it runs the test bumps one counter
of one port on node0002 only, and that node's end part must name exactly that link, the other
node's nothing; `health --job-records` (on the host) then judges node0002 degraded.

Binding: task/affinity on, node0001 has 2 CPUs and 2 fake GPUs and a topo -m putting GPU0 near
CPU 0 and GPU1 near CPU 1 (simulated: no real 2-CPU capture exists, and the GPUs cannot exist
here). `srun -n2 --gpus-per-task=1 --cpu-bind=map_cpu:0,1` must give TOPOGRAPH_BINDING=ok in
both tasks, `map_cpu:1,0` far-numa (the jobs run as root: binding as alice fails in containers
on 26.05).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Cluster, ClusterSpec, HarnessError, NodeSpec

from tests.support import ib_sysfs
from tests.support.sim_gpu import near_cpus_topology, render_topo_matrix

pytestmark = pytest.mark.integration

NODES = ("node0001", "node0002")
SIM = "nodes=2,gpus=2,rails=1,su=2,tiers=2,prefix=node"  # the same two names, for health
RECORDS = "/shared/records"
SYSFS = "/var/lib/fake-ib"
TOOL = "/usr/local/bin/topograph-slurm --config /etc/slurm/topograph-slurm.yaml record"
CONFIG = f"""record_dir: {RECORDS}
sim: {SIM}
infiniband_sysfs: {SYSFS}
record_topo_matrix: /etc/slurm/topo.txt
"""
HOOKS = {
    "slurmctld-prolog.sh": f"#!/bin/sh\nexec {TOOL} start\n",
    "prolog.sh": f"#!/bin/sh\nexec {TOOL} node-start\n",
    "epilog.sh": f"#!/bin/sh\nexec {TOOL} node-end\n",
    "taskprolog.sh": f"#!/bin/sh\nexec {TOOL} task\n",
}


def _sysfs_files() -> dict[str, str]:
    """The fake tree as files for ``write_files`` under /var/lib (laid out from the real
    prints in a scratch directory, then read back by path)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = ib_sysfs.lay_out(Path(scratch) / "fake-ib")
        return {
            str(path.relative_to(scratch)): path.read_text()
            for path in sorted(root.rglob("*"))
            if path.is_file()
        }


@pytest.fixture(scope="module")
def cluster(make_module_cluster: Callable[..., Cluster]) -> Cluster:
    spec = ClusterSpec(
        nodes=[NodeSpec(name, cpus=2, gpus=2) for name in NODES],
        tool=True,
        shared_dirs=("/shared",),
        slurm_conf_extra=(
            "PrologSlurmctld=/etc/slurm/slurmctld-prolog.sh\n"
            "PrologFlags=Alloc\nProlog=/etc/slurm/prolog.sh\nEpilog=/etc/slurm/epilog.sh\n"
            "TaskProlog=/etc/slurm/taskprolog.sh\n"
        ),
    )
    conf = str(spec.render()["slurm.conf"])
    spec.extra_files = {
        "slurm.conf": conf.replace("TaskPlugin=task/none", "TaskPlugin=task/affinity"),
        "topograph-slurm.yaml": CONFIG,
        "topo.txt": render_topo_matrix(near_cpus_topology(["0", "1"])),
        **HOOKS,
    }
    started = make_module_cluster(spec)
    started.write_files(_sysfs_files(), path="/var/lib")
    return started


def _part(cluster: Cluster, job: str, name: str, timeout: float = 60) -> dict[str, object]:
    """A part from /shared, waiting for the hook that writes it (the Epilog runs after the job)."""
    path = f"{RECORDS}/job-{job}.d/{name}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            loaded: dict[str, object] = json.loads(cluster.read_file(path))
            return loaded
        except HarnessError:
            time.sleep(1)
    raise AssertionError(
        f"{path} never written; slurmd log:\n{cluster.slurmd_log(NODES[0])[-3000:]}"
    )


def test_the_end_record_names_the_link_bumped_during_the_job(
    cluster: Cluster, tmp_path: Path, shims: Callable[..., dict[str, str]]
) -> None:
    job = cluster.sbatch(f"-N2 -w {','.join(NODES)} --wrap 'sleep 10'")
    for node in NODES:
        start = _part(cluster, job, f"{node}.start.json")
        assert (start["part"], start["node"], start["findings"]) == ("node-start", node, [])
    counter = f"{SYSFS}/mlx5_1/ports/1/counters/symbol_error"
    bumped = cluster.exec(f"sh -c 'echo 5 > {counter}'", node=NODES[1])
    assert bumped.rc == 0, bumped
    cluster.wait_job(job, states=("COMPLETED",))
    assert _part(cluster, job, f"{NODES[0]}.end.json")["findings"] == []
    end = _part(cluster, job, f"{NODES[1]}.end.json")
    assert end["findings"] == [
        {
            "kind": "link-errors-during-job",
            "subject": f"{NODES[1]}/mlx5_1/1",
            "message": "mlx5_1/1: symbol_error +5 during the job",
            "level": "problem",
            "nodes": [NODES[1]],
        }
    ]
    local = tmp_path / "records" / f"job-{job}.d"
    local.mkdir(parents=True)
    for node in NODES:
        data = cluster.read_file(f"{RECORDS}/job-{job}.d/{node}.end.json")
        (local / f"{node}.end.json").write_bytes(data)
    env = shims(cluster, "scontrol")
    health = ["topograph-slurm", "--config", "/dev/null", "health"]
    health += ["--sim", SIM, "--json", "--job-records", "--record-dir", str(tmp_path / "records")]
    done = subprocess.run(health, capture_output=True, text=True, env=env, check=False)
    assert done.returncode in (0, 1), done.stderr
    verdicts = {row["node"]: row["verdict"] for row in json.loads(done.stdout)["nodes"]}
    assert verdicts == {NODES[0]: "healthy", NODES[1]: "degraded"}, done.stdout


@pytest.mark.parametrize(("cpus", "expected"), [("0,1", "ok"), ("1,0", "far-numa")])
def test_each_task_gets_its_binding_verdict(cluster: Cluster, cpus: str, expected: str) -> None:
    """One TaskProlog gives each task the job record's values (record start ran as
    PrologSlurmctld) and its own binding verdict."""
    show = "echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $TOPOGRAPH_BINDING $TOPOGRAPH_NODES"
    step = f"srun -w {NODES[0]} -N1 -n2 --gpus-per-task=1 --cpu-bind=map_cpu:{cpus} -l"
    ran = cluster.exec(f"{step} sh -c '{show}'")
    assert ran.rc == 0, ran
    lines = sorted(ran.stdout.split("\n"))
    assert lines == ["", f"0: 0 0 {expected} 1", f"1: 1 1 {expected} 1"], ran
