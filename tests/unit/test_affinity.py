"""GPU↔NIC affinity findings (analysis/nvlink/affinity.py) on every real ``topo -m`` capture
and on real captures with one thing broken (tests/support/affinity.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.affinity import numa_moved, real_topology, without_nics
from topograph_slurm.analysis.nvlink.affinity import affinity_issues, off_rail
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.health import DEGRADED

#: Every real capture, read alone: no affinity finding, and why (hand-read from the matrix).
#: The second value: the GPUs without one NIC of their own (what the rail finding counts when
#: most nodes of the type have one NIC per GPU).
QUIET: dict[str, tuple[str, list[int]]] = {
    "2gpu-nvlink-nv2-workstation-stas00.txt": ("no NIC in the matrix", [0, 1]),
    "2gpu-pcie-phb-consumer-stas00.txt": ("no NIC in the matrix", [0, 1]),
    "a100-8gpu-sxm-nonic-compact-stas00.txt": ("NICs left out by the author", list(range(8))),
    "asus-esc8000a-e12-4x-rtx6000ada-4nic-pcie.txt": (
        "GPU0/1 reach NIC0/1 and GPU2/3 NIC2/3 over NODE, inside their own NUMA node; "
        "each pair of GPUs shares its two NICs",
        [0, 1, 2, 3],
    ),
    "dgx-a100-8gpu-12nic-mlx5-columns.txt": (
        "each GPU pair reaches its two mlx5 over PXB on its own NUMA node (3, 1, 7, 5); "
        "mlx5_4/5/10/11 are SYS from every GPU (nobody's rail, their NUMA node unknown)",
        list(range(8)),
    ),
    "dgx1-v100-topo-mp-pcie-only-4nic.txt": (
        "each GPU pair has one PIX mlx5 on its own NUMA node (0 for GPU0-3, 1 for GPU4-7)",
        list(range(8)),
    ),
    "gb200-4gpu-8nic-grace-openshift.txt": (
        "every GPU is SYS from every NIC: the tray's design (NICs on Grace, over C2C)",
        [0, 1, 2, 3],
    ),
    "h100-8gpu-8ib-5eth-13nic-dgx.txt": (
        "each GPU one PIX mlx5_ib of its own, NUMA 0 for GPU0-3 (whose PIX NICs are NODE to "
        "GPU0-3 only), NUMA 1 for GPU4-7",
        [],
    ),
    "h100-8gpu-sxm-ht-nonic-stas00.txt": ("NICs left out by the author", list(range(8))),
    "hgx-8gpu-nv18-12nic-numa-off-tpgds.txt": (
        "NUMA off: one NUMA node, each GPU one PIX NIC of its own",
        [],
    ),
    "hgx-h200-8gpu-10nic-amd-2socket.txt": (
        "each GPU a PIX NIC on its own socket (NUMA 0: NIC0-5, NUMA 1: NIC6-9); GPU3 has three",
        [3],
    ),
    "puget-wrx90-2x-rtx6000ada-2nic-pcie.txt": (
        "one NUMA node: both GPUs reach both NICs over NODE",
        [0, 1],
    ),
}


def test_every_real_capture_has_an_expectation(real_fixtures: Path) -> None:
    captures = {p.name for p in (real_fixtures / "nvidia-smi-topo").iterdir()}
    assert captures == set(QUIET)


@pytest.mark.parametrize("capture", sorted(QUIET))
def test_no_real_capture_read_alone_has_an_affinity_finding(capture: str) -> None:
    topo = real_topology(f"nvidia-smi-topo/{capture}")
    assert affinity_issues({"node1": topo}) == [], QUIET[capture][0]
    assert off_rail(topo) == QUIET[capture][1], QUIET[capture][0]


def test_the_real_8gpu_captures_together_are_not_mostly_one_nic_per_gpu() -> None:
    """Seven 8-GPU captures, two of them (H100 DGX, HGX NUMA off) one NIC per GPU: the type
    is not mostly built that way, so the other five are not findings."""
    eight = {
        name: real_topology(f"nvidia-smi-topo/{name}")
        for name in QUIET
        if real_topology(f"nvidia-smi-topo/{name}").gpu_count == 8
    }
    assert len(eight) == 7
    assert affinity_issues(eight) == []


def test_a_gpu_whose_numa_affinity_names_the_other_socket_is_far_from_its_nic() -> None:
    """GPU3's PIX rail mlx5_ib3 is NODE to GPU0-2 (NUMA 0) and SYS to GPU4-7: it sits on
    NUMA 0. A NUMA Affinity column saying 1 binds GPU3's tasks to the other socket."""
    issues = affinity_issues({"gpu0001": numa_moved(real_topology(), 3, 1)})
    assert [(i.finding.kind, i.finding.subject, i.gpus) for i in issues] == [
        (FindingKind.GPU_NIC_FAR_NUMA, "gpu0001", (3,))
    ]
    assert "GPU3 (NUMA 1)" in issues[0].finding.message
    assert "mlx5_ib3 sits with the GPUs of NUMA 0" in issues[0].finding.message


def test_gpus_left_with_only_sys_nics_when_their_socket_lost_its_nics() -> None:
    """Socket 1's NICs (mlx5_ib4-7, the Ethernet ones) gone: GPU4-7 reach only socket 0's,
    over SYS, while GPU0-3 keep their PIX rails."""
    topo = real_topology()
    gone = [n for n in topo.nics if n not in ("mlx5_ib0", "mlx5_ib1", "mlx5_ib2", "mlx5_ib3")]
    issues = affinity_issues({"gpu0001": without_nics(topo, *gone)})
    assert [(i.finding.kind, i.gpus) for i in issues] == [
        (FindingKind.GPU_NIC_SYS_ONLY, (4, 5, 6, 7))
    ]
    assert "while GPU0, GPU1, GPU2, GPU3 reach one" in issues[0].finding.message


def test_a_node_that_lost_a_nic_is_uneven_where_its_type_has_one_nic_per_gpu() -> None:
    """mlx5_ib3 gone: GPU3's nearest NIC becomes GPU2's (PXB), shared. Two intact nodes of
    the same GPU count make one NIC per GPU the type's layout."""
    topo = real_topology()
    nodes = {"gpu0001": topo, "gpu0002": without_nics(topo, "mlx5_ib3"), "gpu0003": topo}
    issues = affinity_issues(nodes)
    assert [(i.finding.kind, i.finding.subject, i.gpus) for i in issues] == [
        (FindingKind.GPU_NIC_RAILS_UNEVEN, "gpu0002", (2, 3))
    ]
    assert "most 8-GPU nodes (2 of 3)" in issues[0].finding.message
    # a tie is no majority: two of four nodes uneven gives nothing
    nodes["gpu0004"] = without_nics(topo, "mlx5_ib5")
    assert affinity_issues(nodes) == []


def test_the_real_h200_among_dgx_h100s_is_uneven() -> None:
    """The HGX H200 capture's GPU3 has three PIX NICs: among two DGX H100 nodes (one NIC per
    GPU) it is the type's odd one."""
    nodes = {
        "gpu0001": real_topology(),
        "gpu0002": real_topology(),
        "gpu0003": real_topology("nvidia-smi-topo/hgx-h200-8gpu-10nic-amd-2socket.txt"),
    }
    issues = affinity_issues(nodes)
    assert [(i.finding.subject, i.gpus) for i in issues] == [("gpu0003", (3,))]


def test_affinity_kinds_degrade_the_node_never_drain_it() -> None:
    kinds = [
        FindingKind.GPU_NIC_FAR_NUMA,
        FindingKind.GPU_NIC_SYS_ONLY,
        FindingKind.GPU_NIC_RAILS_UNEVEN,
    ]
    assert {kind.severity for kind in kinds} == {DEGRADED}
