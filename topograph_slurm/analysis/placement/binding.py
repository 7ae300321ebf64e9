"""Per-local-rank binding on one node: which GPU, NIC(s) and CPUs each of a node's tasks should
use when a job runs one task per GPU (local rank r on the node's r-th GPU, as ``srun`` with
``--gpus-per-task=1`` and torchrun's ``LOCAL_RANK`` lay them).

The NICs are the GPU's rail as ``nvidia-smi topo -m`` shows it: every NIC on the GPU's best
PCIe path class (``PIX`` before ``PXB`` before ``PHB`` …); where all NICs tie (a GB200 tray,
``SYS`` everywhere) that is all of them, the matrix telling nothing better. A NIC with no
device name (its legend line unreadable, or a name no device has) is no NIC to bind. The CPUs
are the GPU's ``CPU Affinity`` as Linux CPU ids, hyperthreads included: srun's ``--cpu-bind`` and
``taskset`` take Linux ids, unlike gres.conf's ``Cores=`` (:mod:`..nvlink.gres`).

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from topograph_slurm.analysis.nvlink.gres import cpu_ranges
from topograph_slurm.errors import InputError
from topograph_slurm.model.gpu import GpuTopology, RankBinding
from topograph_slurm.model.names import fold, natural_key

#: A NIC name NCCL_IB_HCA and UCX_NET_DEVICES can take (``mlx5_0``, ``ibp12s0``, ``bnxt_re0``):
#: what Linux names an RDMA device, at most 64 characters.
_DEVICE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", re.ASCII)
#: A matrix column label: a NIC whose legend line named none the parser could read.
_LABEL = re.compile(r"NIC\d+", re.ASCII)


def _bindable(nic: str) -> bool:
    """Whether *nic* names a device: not a bare column label (``NIC0``, the legend's name
    refused), not a string no device has (``mlx5_1;reboot`` would run in the wrapper's shell)."""
    return _DEVICE.fullmatch(nic) is not None and _LABEL.fullmatch(nic) is None


def node_binding(
    topo: GpuTopology, ranks: int | None = None, first: int = 0
) -> tuple[RankBinding, ...]:
    """The binding of *ranks* local ranks (default: one per GPU) on the node's GPUs from its
    *first* on (an instance sharing a node with others: ``pools``). More ranks than GPUs is an
    InputError: a rank without a GPU of its own has nothing to bind to."""
    count = topo.gpu_count - first if ranks is None else ranks
    if not topo.gpus:
        raise InputError("nvidia-smi topo -m lists no GPUs")
    if first + count > topo.gpu_count:
        raise InputError(
            f"{count} ranks per node from GPU {first} but topo -m lists {topo.gpu_count} GPUs"
            if first
            else f"{count} ranks per node but topo -m lists {topo.gpu_count} GPUs"
        )
    gpus = topo.gpus[first : first + count]
    return tuple(_rank(topo, rank, gpu) for rank, gpu in enumerate(gpus))


def _rank(topo: GpuTopology, rank: int, gpu: int) -> RankBinding:
    text = topo.cpu_affinity.get(gpu)
    ranges = cpu_ranges(text) if text else []
    cpus = tuple(sorted({c for first, last in ranges for c in range(first, last + 1)}))
    nics = tuple(nic for nic in topo.closest_nics(gpu) if _bindable(nic))
    return RankBinding(rank, gpu, nics, cpus, topo.vendor)


def job_binding(
    nodes: Mapping[str, GpuTopology], ranks: int | None = None, first: int = 0
) -> tuple[RankBinding, ...]:
    """The one binding every node of a job shares: srun's ``--cpu-bind`` and the wrapper apply
    the same list on every node, so nodes that would bind differently are an InputError naming
    them (they need separate steps)."""
    by_binding: dict[tuple[RankBinding, ...], list[str]] = {}
    for name in sorted(nodes, key=natural_key):
        try:
            binding = node_binding(nodes[name], ranks, first)
        except InputError as err:
            raise InputError(f"{name}: {err}") from None
        by_binding.setdefault(binding, []).append(name)
    if len(by_binding) > 1:
        groups = "; ".join(fold(names) for names in by_binding.values())
        raise InputError(f"the nodes bind their ranks differently ({groups}): one step each")
    return next(iter(by_binding))
