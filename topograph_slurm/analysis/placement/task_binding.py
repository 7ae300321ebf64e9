"""Is a running task bound near its GPUs? Its allowed CPUs (``sched_getaffinity``, as Slurm's
task/affinity left them) against the CPU Affinity ``nvidia-smi topo -m`` gives for the GPUs
in its ``CUDA_VISIBLE_DEVICES``. A task whose CPUs are on the far socket pays the socket
interconnect on every host-device copy and every kernel launch: the job runs, slower, and
nothing in its own logs says why.

Statuses (exported as ``TOPOGRAPH_BINDING``): ``ok`` every allowed CPU near its GPUs;
``far-numa`` none; ``spans-numa`` some; ``unbound`` the task may run on every CPU of the node
(no binding at all, while its GPUs are near only some); ``no-gpu`` no GPU visible; ``unknown``
the GPUs are named by UUID or MIG id, or the matrix does not know them. Pure.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from topograph_slurm.analysis.nvlink.gres import cpu_ranges
from topograph_slurm.errors import InputError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology, cpu_runs
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import Finding

OK, FAR_NUMA, SPANS_NUMA, UNBOUND, NO_GPU, UNKNOWN = (
    "ok",
    "far-numa",
    "spans-numa",
    "unbound",
    "no-gpu",
    "unknown",
)
STATUSES = (OK, FAR_NUMA, SPANS_NUMA, UNBOUND, NO_GPU, UNKNOWN)


@dataclass(frozen=True, slots=True)
class TaskBinding:
    """One task's verdict, why (``detail``), and its finding when it is a problem."""

    status: str
    detail: str
    finding: Finding | None = None


def check(
    allowed: Collection[int],
    node_cpus: Collection[int],
    visible: str | None,
    topo: GpuTopology | None,
    task: str,
) -> TaskBinding:
    """The binding of the task named *task* (``<node>/task-<step>.<proc>``)."""
    if not visible or visible.strip() in ("", "NoDevFiles"):
        return TaskBinding(NO_GPU, "no GPU visible to the task")
    gpus = [natural(part) for part in visible.split(",")]
    if None in gpus:
        return TaskBinding(UNKNOWN, f"GPUs {visible!r} are not indices (UUIDs, MIG ids)")
    if topo is None:
        return TaskBinding(UNKNOWN, "no nvidia-smi topo -m for this node")
    near = _near(topo, [g for g in gpus if g is not None])
    if near is None:
        return TaskBinding(UNKNOWN, f"topo -m gives no CPU affinity for GPU {visible}")
    return _judge(frozenset(allowed), frozenset(node_cpus), near, visible, task)


def _judge(
    allowed: frozenset[int], node_cpus: frozenset[int], near: frozenset[int], gpus: str, task: str
) -> TaskBinding:
    detail = f"CPUs {fold_cpus(allowed)}, GPU {gpus} near CPUs {fold_cpus(near)}"
    if allowed <= near:
        return TaskBinding(OK, detail)
    if allowed >= node_cpus:
        return TaskBinding(UNBOUND, f"{detail}: the task may run on every CPU of the node")
    if allowed & near:
        return TaskBinding(
            SPANS_NUMA, detail, Finding(FindingKind.BINDING_SPANS_NUMA, task, detail)
        )
    return TaskBinding(FAR_NUMA, detail, Finding(FindingKind.BINDING_FAR_NUMA, task, detail))


def _near(topo: GpuTopology, gpus: list[int]) -> frozenset[int] | None:
    """The CPUs near any of *gpus*; None when one of them has no (readable) affinity."""
    near: set[int] = set()
    for gpu in gpus:
        text = topo.cpu_affinity.get(gpu)
        if not text:
            return None
        try:
            near.update(cpu for first, last in cpu_ranges(text) for cpu in range(first, last + 1))
        except InputError:
            return None
    return frozenset(near)


def fold_cpus(cpus: Collection[int]) -> str:
    """``{0, 1, 2, 5}`` → ``0-2,5``: Linux's CPU list form."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in cpu_runs(cpus))
