"""Real ``nvidia-smi topo -m`` captures with one thing broken, for the GPU↔NIC affinity tests:
a NIC gone from the bus, a GPU whose NUMA Affinity column names the other socket."""

from __future__ import annotations

import dataclasses

from tests.conftest import real_fixture
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.sources.nvidia_smi import parse_topo_matrix

#: The DGX-style H100 capture: each GPU one PIX rail, the Ethernet NICs nobody's.
H100 = "nvidia-smi-topo/h100-8gpu-8ib-5eth-13nic-dgx.txt"


def real_topology(relpath: str = H100) -> GpuTopology:
    """A real capture under ``nvidia-smi-topo/``, parsed."""
    return parse_topo_matrix(real_fixture(relpath).read_text(errors="replace"))


def without_nics(topo: GpuTopology, *gone: str) -> GpuTopology:
    """*topo* as the node shows it once *gone* dropped off the bus: no row, no column."""
    return dataclasses.replace(
        topo,
        nics=tuple(n for n in topo.nics if n not in gone),
        gpu_nic_links={k: v for k, v in topo.gpu_nic_links.items() if k[1] not in gone},
        nic_links={k: v for k, v in topo.nic_links.items() if not set(k) & set(gone)},
    )


def numa_moved(topo: GpuTopology, gpu: int, numa: int) -> GpuTopology:
    """*topo* with *gpu*'s NUMA Affinity column saying *numa* (its links unchanged)."""
    return dataclasses.replace(topo, numa_affinity=topo.numa_affinity | {gpu: (numa,)})
