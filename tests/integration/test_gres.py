"""gres.conf from ``topograph-slurm gres`` read by a real slurmd (24.11 and 26.05).

Two nodes get the file made from the real DGX H100 capture (8 GPUs, two NUMA nodes of 56
cores with their hyperthreads) plus that HGX H100's ``nvidia-smi -q`` for Type=; the
entrypoint's fake ``/dev/nvidia0..7`` are the File= devices. slurmd must start with it (it
refuses a gres.conf it cannot read), slurmctld must see the typed GPUs, and ``slurmd -G``
must print each GPU with the Cores= and Links= as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.cli.main import main

pytestmark = pytest.mark.integration

REAL = Path(__file__).parents[1] / "fixtures" / "real"
TOPO = REAL / "nvidia-smi-topo" / "h100-8gpu-8ib-5eth-13nic-dgx.txt"
Q = REAL / "nvidia-smi-q" / "h100-sxm-8gpu-hgx-q-fabric-completed.txt"
NODES = ("gpu01", "gpu02")
#: 2 sockets x 56 cores x 2 threads, as the capture's CPU affinity shows (0-223)
CPUS = 224
NODE_LINE = "Sockets=2 CoresPerSocket=56 ThreadsPerCore=2"


def _gres_conf() -> str:
    args = ["gres", "--topo-matrix", str(TOPO), "--nvidia-smi-q", str(Q), "--nodes", "gpu[01-02]"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _links(gpu: int) -> str:
    return ",".join("-1" if peer == gpu else "18" for peer in range(8))


def test_slurmd_reads_the_generated_gres_conf(make_cluster: Callable[..., Cluster]) -> None:
    gres_conf = _gres_conf()
    nodes = [NodeSpec(name, cpus=CPUS, gpus=8) for name in NODES]
    # the node line with the capture's sockets/cores/threads: Cores= are core indices
    spec = ClusterSpec(nodes=nodes, extra_files={"gres.conf": gres_conf})
    files = spec.render()
    conf = str(files["slurm.conf"])
    spec.extra_files = {"gres.conf": gres_conf, "slurm.conf": _with_cores(conf)}
    cluster = make_cluster(spec)
    show = cluster.exec("scontrol show node gpu01").check("scontrol show node").stdout
    assert "Gres=gpu:h100:8(S:0-1)" in show, show  # GPUs 0-3 on socket 0, 4-7 on 1
    for node in NODES:
        printed = cluster.exec(f"slurmd -G -N {node}", node=node).check("slurmd -G")
        text = printed.stdout + printed.stderr
        for gpu in range(8):
            line = _gres_line(text, gpu)
            assert "Type=h100" in line, line
            assert f"Cores={'0-55' if gpu < 4 else '56-111'}" in line, line
            assert f"Links={_links(gpu)}" in line, line
    job = cluster.exec("srun -w gpu01 --gres=gpu:h100:2 bash -c 'echo $CUDA_VISIBLE_DEVICES'")
    assert job.rc == 0 and job.stdout.strip() == "0,1", job


def _with_cores(conf: str) -> str:
    """slurm.conf's node lines with the capture's socket/core/thread counts, and the GPUs
    typed as gres.conf types them (an untyped Gres=gpu:8 leaves typed lines unmatched)."""
    conf = re.sub(r"(NodeName=gpu0\d CPUs=\d+)", rf"\1 {NODE_LINE}", conf)
    return conf.replace("Gres=gpu:8", "Gres=gpu:h100:8")


def _gres_line(text: str, gpu: int) -> str:
    """slurmd -G's line for /dev/nvidia<gpu>."""
    for line in text.splitlines():
        if re.search(rf"File=/dev/nvidia{gpu}\b", line):
            return line
    raise AssertionError(f"no GRES line for /dev/nvidia{gpu} in:\n{text}")
