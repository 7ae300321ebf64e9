"""``order --format binding-srun`` and ``binding-wrapper`` applied by a real srun (24.11, 26.05).

A node of two GPUs whose ``nvidia-smi topo -m`` (written here, the machine's CPUs being only
0-1) puts GPU0 and its NIC on CPU 0, GPU1 and its NIC on CPU 1. slurm.conf runs
``TaskPlugin=task/affinity`` (the harness's default is task/none, which ignores --cpu-bind):
each task of ``srun <our options>`` must get exactly the CPUs and GPU our line promised, and the
wrapper must export its local rank's NIC and CPUs inside the real step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.cli.main import main

pytestmark = pytest.mark.integration

NODE = "gpu01"
TOPO_M = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tSYS\tPIX\tSYS\t0\t0\t\tN/A\n"
    "GPU1\tSYS\t X \tSYS\tPIX\t1\t1\t\tN/A\n"
    "NIC0\tPIX\tSYS\t X \tSYS\n"
    "NIC1\tSYS\tPIX\tSYS\t X \n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)


def _order(tmp_path: Path, fmt: str) -> str:
    topo = tmp_path / "topo.txt"
    topo.write_text(TOPO_M)
    conf = tmp_path / "topology.conf"
    conf.write_text(f"SwitchName=leaf1 Nodes={NODE}\n")
    args = ["order", "--topology", str(conf), "--nodes", NODE, "--gpus-per-node", "2"]
    result = CliRunner().invoke(main, [*args, "--topo-matrix", str(topo), "--format", fmt])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_srun_applies_the_binding(tmp_path: Path, make_cluster: Callable[..., Cluster]) -> None:
    options = _order(tmp_path, "binding-srun").strip()
    assert options == "--ntasks-per-node=2 --cpu-bind=mask_cpu:0x1,0x2 --gpu-bind=map_gpu:0,1"
    spec = ClusterSpec(nodes=[NodeSpec(NODE, cpus=2, gpus=2)])
    conf = str(spec.render()["slurm.conf"])
    assert "TaskPlugin=task/none" in conf
    spec.extra_files = {
        "slurm.conf": conf.replace("TaskPlugin=task/none", "TaskPlugin=task/affinity"),
        "bind.sh": _order(tmp_path, "binding-wrapper"),
    }
    cluster = make_cluster(spec)
    show = "grep Cpus_allowed_list /proc/self/status | cut -f2"
    step = f"srun -w {NODE} -N1 --gres=gpu:2 {options} -l "
    ran = cluster.exec(step + f"bash -c 'echo $SLURM_LOCALID $CUDA_VISIBLE_DEVICES $({show})'")
    assert ran.rc == 0, ran
    assert sorted(ran.stdout.split("\n")) == ["", "0: 0 0 0", "1: 1 1 1"], ran
    wrapped = "sh /etc/slurm/bind.sh sh -c 'echo $SLURM_LOCALID $NCCL_IB_HCA $TOPOGRAPH_CPUS'"
    ran = cluster.exec(step + wrapped)
    assert ran.rc == 0, ran
    assert sorted(ran.stdout.split("\n")) == ["", "0: 0 =mlx5_0 0", "1: 1 =mlx5_1 1"], ran
