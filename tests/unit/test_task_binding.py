"""One task's CPUs against its GPUs' CPU affinity (analysis/placement/task_binding.py), on the
real DGX H100 capture (two sockets: GPU0-3 near CPUs 0-55,112-167) and a simulated 2-CPU node."""

from __future__ import annotations

from tests.support.affinity import real_topology
from tests.support.sim_gpu import near_cpus_topology
from topograph_slurm.analysis.placement.task_binding import check, fold_cpus

NODE = range(224)
TWO = near_cpus_topology(["0", "1"])


def _status(
    allowed: set[int] | range, visible: str | None, topo: object = None, node: range = NODE
) -> str:
    topo = real_topology() if topo is None else topo
    return check(allowed, node, visible, topo, "gpu01/task-0.0").status  # type: ignore[arg-type]


def test_the_statuses_on_a_real_two_socket_capture() -> None:
    topo = real_topology()
    near0 = topo.cpu_affinity[0]
    assert near0 is not None
    assert _status({0, 1, 2}, "0") == "ok"
    assert _status({150}, "1") == "ok"  # a hyperthread of the near socket
    assert _status({60, 61}, "0") == "far-numa"
    assert _status({0, 60}, "0") == "spans-numa"
    assert _status(NODE, "0") == "unbound"
    assert _status({0}, "") == "no-gpu"
    assert _status({0}, None) == "no-gpu"


def test_gpu_names_that_are_not_indices_are_unknown() -> None:
    assert _status({0}, "GPU-5679a9d0-6f32-6a97-ff37-fce5fd1a2ac9") == "unknown"
    assert _status({0}, "MIG-GPU-5679a9d0/1/0") == "unknown"
    assert _status({0}, "0", topo=near_cpus_topology([""])) == "unknown"  # no affinity column
    assert check({0}, NODE, "0", None, "t").status == "unknown"  # no topo -m at all
    assert _status({0}, "9") == "unknown"  # a GPU the matrix does not have


def test_only_the_problems_carry_a_finding() -> None:
    far = check({1}, range(2), "0", TWO, "n1/task-0.0")
    assert far.status == "far-numa"
    assert far.finding is not None
    assert (far.finding.kind, far.finding.subject) == ("binding-far-numa", "n1/task-0.0")
    assert far.finding.message == "CPUs 1, GPU 0 near CPUs 0"
    assert check({0}, range(2), "0", TWO, "t").finding is None
    assert check({0, 1}, range(2), "0,1", TWO, "t").status == "ok"  # two GPUs, both near


def test_cpu_lists_fold_as_linux_prints_them() -> None:
    assert fold_cpus({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8"
    assert fold_cpus(set()) == ""
