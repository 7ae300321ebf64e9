"""gres.conf from ``topograph-slurm gres`` read by a real slurmd (24.11 and 26.05).

Two nodes get the file made from the real DGX H100 capture (8 GPUs, two NUMA nodes of 56
cores with their hyperthreads) plus that HGX H100's ``nvidia-smi -q`` for Type=; the
entrypoint's fake ``/dev/nvidia0..7`` are the File= devices. slurmd must start with it (it
refuses a gres.conf it cannot read), slurmctld must see the typed GPUs, and ``slurmd -G``
must print each GPU with the Cores= and Links= as written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
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


#: capture → (node line as the capture's node has it, CPUs): a DGX A100 in NPS4 (2 sockets of
#: 64 cores, NUMA nodes of 16) and a 96-core HGX booted with NUMA off (every GPU 0-191)
A100_LINE = "Sockets=2 CoresPerSocket=64 ThreadsPerCore=2"
OFF_LINE = "Sockets=2 CoresPerSocket=48 ThreadsPerCore=2"
SOCKET_CASES = {
    "a100": ("dgx-a100-8gpu-12nic-mlx5-columns.txt", A100_LINE, 256),
    "off": ("hgx-8gpu-nv18-12nic-numa-off-tpgds.txt", OFF_LINE, 192),
}


def _gres_lines(capture: str, node: str, *flags: str) -> list[str]:
    """gres' lines for *node* from *capture* (the header's comments left out)."""
    topo = REAL / "nvidia-smi-topo" / capture
    result = CliRunner().invoke(main, ["gres", "--topo-matrix", str(topo), "--nodes", node, *flags])
    assert result.exit_code == 0, result.output
    return [line for line in result.stdout.splitlines() if line.startswith("NodeName=")]


def _socket_cluster(
    make_cluster: Callable[..., Cluster], lines: dict[str, list[str]], numa_as_socket: bool
) -> Cluster:
    """One node per entry of *lines* (its gres.conf lines), each with its capture's node line."""
    nodes = [NodeSpec(name, cpus=SOCKET_CASES[_case(name)][2], gpus=8) for name in lines]
    gres_conf = "\n".join(line for node_lines in lines.values() for line in node_lines) + "\n"
    spec = ClusterSpec(nodes=nodes, extra_files={"gres.conf": gres_conf})
    conf = str(spec.render()["slurm.conf"])
    for name in lines:
        conf = re.sub(rf"(NodeName={name} CPUs=\d+)", rf"\1 {SOCKET_CASES[_case(name)][1]}", conf)
    if numa_as_socket:
        conf = conf.replace(
            "SlurmdParameters=config_overrides",
            "SlurmdParameters=config_overrides,numa_node_as_socket",
        )
    spec.extra_files = {"gres.conf": gres_conf, "slurm.conf": conf}
    cluster = make_cluster(spec, wait=False)
    deadline = time.monotonic() + 120
    while not all(s.startswith(("idle", "inval")) for s in _states(cluster, lines)):
        assert time.monotonic() < deadline, cluster.node_states()
        time.sleep(1)
    return cluster


def _states(cluster: Cluster, nodes: Iterable[str]) -> list[str]:
    found = cluster.node_states()
    return [found.get(node, "") for node in nodes]


def _case(node: str) -> str:
    """The capture a test node was made from: ``a1`` → ``a100``, ``off2`` → ``off``."""
    return "a100" if node.startswith("a") else "off"


def _refusal(cluster: Cluster, node: str) -> str:
    """slurmctld's verdict on *node*'s GRES: the node's state and reason line."""
    show = cluster.exec(f"scontrol show node {node}").check("scontrol show node").stdout
    return " ".join(
        line.strip() for line in show.splitlines() if "State=" in line or "Reason=" in line
    )


def test_slurm_refuses_numa_cores_and_threads_but_takes_whole_sockets(
    make_cluster: Callable[..., Cluster],
) -> None:
    """What the socket rule is for, on real slurmctld: per-NUMA Cores= on the NPS4 A100
    (``a1``) and Cores=0-191 on the 96-core NUMA-off node (``off1``), as gres wrote them
    before, leave the nodes INVALID; whole sockets (``a2``) and no Cores= (``off2``) do not."""
    old_a100 = _gres_lines(SOCKET_CASES["a100"][0], "a1", "--numa-node-as-socket")
    assert " Cores=48-63 " in old_a100[0]  # NUMA node 3, inside socket 0
    new_off = _gres_lines(SOCKET_CASES["off"][0], "off2")
    assert not any("Cores=" in line for line in new_off)
    old_off = [
        line.replace("NodeName=off2", "NodeName=off1").replace(" Links=", " Cores=0-191 Links=")
        for line in new_off
    ]
    lines = {
        "a1": old_a100,
        "a2": _gres_lines(SOCKET_CASES["a100"][0], "a2"),
        "off1": old_off,
        "off2": new_off,
    }
    assert [line.split(" Cores=")[1].split()[0] for line in lines["a2"]] == ["0-63"] * 4 + [
        "64-127"
    ] * 4
    cluster = _socket_cluster(make_cluster, lines, numa_as_socket=False)
    states = dict(zip(lines, _states(cluster, lines), strict=True))
    assert states == {"a1": "inval", "a2": "idle", "off1": "inval", "off2": "idle"}, states
    log = cluster.slurmctld_log()
    assert "core specification 48-63 for node a1 doesn't match socket boundaries" in log
    assert "invalid GRES core specification (0-191) on node off1" in log
    job = cluster.exec("srun -w a2 --gres=gpu:8 bash -c 'echo $CUDA_VISIBLE_DEVICES'")
    assert job.rc == 0 and job.stdout.strip() == "0,1,2,3,4,5,6,7", job


#: the real 8-GPU MI308X capture (one xGMI hive): AMD lines for the entrypoint's fake
#: /dev/dri/renderD128..135
MI308X = REAL / "rocm-smi-topo" / "mi308x-8gpu-xgmi-2numa-lowpower-warning-msswift.txt"


def test_slurmd_reads_the_amd_gres_conf(make_cluster: Callable[..., Cluster]) -> None:
    args = ["gres", "--topo-matrix", str(MI308X), "--nodes", "gpu[01-02]"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    nodes = [NodeSpec(name, cpus=8, gpus=8) for name in NODES]
    cluster = make_cluster(ClusterSpec(nodes=nodes, extra_files={"gres.conf": result.stdout}))
    show = cluster.exec("scontrol show node gpu01").check("scontrol show node").stdout
    assert "Gres=gpu:8" in show, show
    printed = cluster.exec("slurmd -G -N gpu01", node="gpu01").check("slurmd -G")
    text = printed.stdout + printed.stderr
    for gpu in range(8):
        line = next(x for x in text.splitlines() if f"File=/dev/dri/renderD{128 + gpu}" in x)
        links = ",".join("-1" if peer == gpu else "1" for peer in range(8))
        assert f"Links={links}" in line, line
    env = "echo $ROCR_VISIBLE_DEVICES"
    job = cluster.exec(f"srun -w gpu01 --gres=gpu:2 bash -c '{env}'")
    assert job.rc == 0 and job.stdout.strip() == "0,1", job
