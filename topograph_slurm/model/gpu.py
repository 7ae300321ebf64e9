"""GPU facts of a node and NVLink domains: what nvidia-smi (NVIDIA) or rocm-smi (AMD) reports,
as plain data."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from topograph_slurm.model.result import Finding

#: ``topo -m``'s NVLink token: ``NV18`` is 18 bonded NVLinks.
NV_LINK = re.compile(r"^NV(\d{1,3})$", re.ASCII)

#: rocm-smi's token for an AMD Infinity Fabric (xGMI) link between two GPUs. rocm-smi gives no
#: link count, so a pair joined by xGMI counts as one link wherever NVLinks are counted.
XGMI = "XGMI"


def fast_links(token: str) -> int:
    """The GPU-to-GPU links a ``topo -m``/``--showtopo`` token stands for: ``NV18`` → 18,
    ``XGMI`` → 1, a PCIe path → 0."""
    if token == XGMI:
        return 1
    match = NV_LINK.match(token)
    return int(match.group(1)) if match else 0


ZERO_UUID = "00000000-0000-0000-0000-000000000000"


#: PCIe/SMP path classes of ``topo -m`` from closest to farthest; NVLink (``NV#``) beats all.
#: ``SOC`` is what drivers before ~2017 printed for today's ``SYS``.
PCIE_RANK: dict[str, int] = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


@dataclass(frozen=True, slots=True)
class GpuFabric:
    """One GPU's NVLink-fabric registration, as nvidia-smi reports it.

    ``index`` is nvidia-smi's GPU index; for ``-q`` text it is the position of the GPU's
    section (nvidia-smi lists GPUs in index order), and for fragments without ``GPU …``
    headers it is the position of the Fabric block. ``None`` means "reported as N/A or not
    reported at all"; ``state``/``status``/``health`` keep nvidia-smi's words
    (``Completed``, ``In Progress``, ``Success``, ``Insufficient Resources``, ``Unhealthy``).
    ``health_flags`` names the yes/no Health entries of newer drivers that read ``True``
    (``Route Unhealthy``, ``Route Recovery in progress``), lower-cased.
    ``state_collected`` is False when the output had no State/Status/Health at all (NVIDIA
    topograph's two-column ``--query-gpu=fabric.clusterUuid,fabric.cliqueId``): their None
    then means "not asked", not "reported N/A".
    """

    index: int
    bus_id: str | None = None
    serial: str | None = None
    uuid: str | None = None
    state: str | None = None
    status: str | None = None
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health: str | None = None
    health_bandwidth: str | None = None
    health_flags: tuple[str, ...] = ()
    state_collected: bool = True

    @property
    def domain_id(self) -> str | None:
        """``<ClusterUUID>.<CliqueId>`` when both are known, else None."""
        if self.cluster_uuid is None or self.clique_id is None:
            return None
        return f"{self.cluster_uuid}.{self.clique_id}"


@dataclass(frozen=True, slots=True)
class GpuTopology:
    """What ``nvidia-smi topo -m`` (NVIDIA) or ``rocm-smi --showtopo`` (AMD) says about one
    node; *vendor* says which (``nvidia`` or ``amd``).

    GPUs are addressed by their index (``GPU3`` → 3); NICs by name — the NIC Legend's device
    name (``mlx5_ib0``) when there is one, else the header label (``mlx5_4`` on older drivers,
    ``NIC2`` when the legend was cut off). Link types are nvidia-smi's tokens: ``NV18``,
    ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``.
    """

    gpus: tuple[int, ...]
    nics: tuple[str, ...]
    gpu_links: dict[tuple[int, int], str]
    gpu_nic_links: dict[tuple[int, str], str]
    nic_links: dict[tuple[str, str], str] = field(default_factory=dict)
    cpu_affinity: dict[int, str | None] = field(default_factory=dict)
    numa_affinity: dict[int, tuple[int, ...]] = field(default_factory=dict)
    gpu_numa_id: dict[int, int | None] = field(default_factory=dict)
    vendor: str = "nvidia"

    @property
    def gpu_count(self) -> int:
        """Number of GPUs in the matrix."""
        return len(self.gpus)

    def link(self, a: int, b: int) -> str:
        """Link type between GPUs *a* and *b* (order does not matter)."""
        return self.gpu_links[(min(a, b), max(a, b))]

    def nvlinks(self, a: int, b: int) -> int:
        """Number of bonded NVLinks (an xGMI pair: 1) between GPUs *a* and *b*; 0 when they
        talk over PCIe."""
        return fast_links(self.link(a, b))

    @property
    def all_nvlink(self) -> bool:
        """Every GPU pair is NVLink- (or xGMI-) connected. False for fewer than two GPUs: a lone
        GPU gives tensor parallelism nothing to ride on, so it must not look like an NVLink node."""
        return self.gpu_count >= 2 and all(fast_links(v) for v in self.gpu_links.values())

    @property
    def fast_groups(self) -> tuple[tuple[int, ...], ...]:
        """The GPUs joined by direct NVLink/xGMI links, as groups (connected components, in
        GPU order): one group is the node's fast domain (an xGMI hive, an NVLink clique); a
        GPU with no such link is a group of its own."""
        group = {gpu: gpu for gpu in self.gpus}

        def root(gpu: int) -> int:
            while group[gpu] != gpu:
                gpu = group[gpu]
            return gpu

        for (a, b), token in self.gpu_links.items():
            if fast_links(token):
                group[max(root(a), root(b))] = min(root(a), root(b))
        found: dict[int, list[int]] = {}
        for gpu in self.gpus:
            found.setdefault(root(gpu), []).append(gpu)
        return tuple(tuple(members) for members in found.values())

    @property
    def min_nvlinks(self) -> int:
        """The smallest NVLink bond over all GPU pairs (0 if any pair lacks NVLink)."""
        if self.gpu_count < 2:
            return 0
        return min(self.nvlinks(a, b) for a, b in self.gpu_links)

    def closest_link(self, gpu: int) -> str | None:
        """The best PCIe path class from *gpu* to any NIC, or None without NICs."""
        ranks = [PCIE_RANK[self.gpu_nic_links[(gpu, nic)]] for nic in self.nics]
        if not ranks:
            return None
        best = min(ranks)
        return next(name for name, rank in PCIE_RANK.items() if rank == best)

    def closest_nics(self, gpu: int) -> tuple[str, ...]:
        """The NIC(s) nearest to *gpu* (its rail): all NICs sharing the best path class.

        On a DGX H100 that is the one ``PIX`` NIC; on a GB200 tray, where every NIC is
        ``SYS`` from every GPU, it is all of them — the matrix cannot tell rails apart there.
        """
        best = self.closest_link(gpu)
        return tuple(n for n in self.nics if self.gpu_nic_links[(gpu, n)] == best)

    @property
    def rails(self) -> dict[int, tuple[str, ...]]:
        """``closest_nics`` for every GPU."""
        return {gpu: self.closest_nics(gpu) for gpu in self.gpus}

    def numa_node(self, gpu: int) -> int | None:
        """The first NUMA node in the GPU's NUMA affinity (the CPU socket it hangs off)."""
        nodes = self.numa_affinity.get(gpu, ())
        return nodes[0] if nodes else None

    def near_numas(self, nic: str, besides: int | None = None) -> set[int | None]:
        """The NUMA nodes of the GPUs (but *besides*) that reach *nic* without ``SYS``.

        ``topo -m`` gives NUMA affinity for GPUs only; a NIC's NUMA node is what its paths
        tell: anything nearer than ``SYS`` stays inside one NUMA node (``NODE`` is "between
        host bridges within a NUMA node"), so a NIC shares the NUMA node of every GPU it is
        not ``SYS`` from. A NIC ``SYS`` from every GPU (a GB200 tray's, hung off Grace) gives
        an empty set: the matrix does not say where it sits.
        """
        return {
            self.numa_node(gpu)
            for gpu in self.gpus
            if gpu != besides and self.gpu_nic_links.get((gpu, nic)) not in (None, "SYS")
        }


class DomainKind(StrEnum):
    """What a node's GPUs say about NVLink beyond the node."""

    MULTI_NODE = "multi-node"  # a usable multi-node NVLink domain (domain_id set)
    SINGLE_NODE = "single-node"  # NVSwitch inside the node only (all-zero ClusterUUID)
    NONE = "none"  # no fabric at all (PCIe/NVLink-bridge GPUs, State N/A)
    INVALID = "invalid"  # fabric present but not usable; see findings


@dataclass(frozen=True, slots=True)
class DomainResult:
    """The verdict for one node. ``domain_id`` is set only for a clean multi-node domain;
    ``cluster_uuid``/``clique_id`` are kept whenever the GPUs agree, even if the node is
    invalid, so the report can say which rack a broken tray belongs to."""

    kind: DomainKind
    gpu_count: int
    domain_id: str | None = None
    cluster_uuid: str | None = None
    clique_id: int | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """The node's fabric is consistent (multi-node or single-node) and no finding is a
        problem (information, such as "state not collected", does not count)."""
        consistent = self.kind in (DomainKind.MULTI_NODE, DomainKind.SINGLE_NODE)
        return consistent and not any(finding.is_problem for finding in self.findings)


@dataclass(slots=True)
class Domain:
    """One multi-node NVLink domain (``<ClusterUUID>.<CliqueId>``) and its nodes."""

    id: str
    nodes: list[str]
    cluster_uuid: str = ""
    clique_id: int = 0


@dataclass(frozen=True, slots=True)
class GresDevice:
    """One GPU's ``gres.conf`` line: ``Type=`` (None when only ``topo -m`` is known), the
    Slurm core indices of its NUMA node (None when topo -m has no CPU affinity), its
    ``Links=`` (one count per GPU index, -1 for itself; None when the node has no NVLink or
    xGMI) and its device ``File=`` (``/dev/nvidiaN``; ``/dev/dri/renderD…`` on AMD)."""

    index: int
    type: str | None
    cores: tuple[int, ...] | None
    links: tuple[int, ...] | None
    file: str = ""


@dataclass(frozen=True, slots=True)
class GresGroup:
    """Nodes with the same GPU layout: one ``NodeName=`` hostlist, one line per GPU."""

    nodes: tuple[str, ...]
    devices: tuple[GresDevice, ...]


@dataclass(frozen=True, slots=True)
class GresPlan:
    """What ``gres`` writes: the groups in node order, the findings (nodes that differ from
    their type's layout, nodes not read) and notes on what was left out and why."""

    groups: tuple[GresGroup, ...]
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RankBinding:
    """What one local rank (one task per GPU, in GPU order) should use on its node: its GPU
    index, its nearest NIC(s) by ``topo -m``'s best link class (empty without NICs), the Linux
    CPU ids of its GPU's CPU affinity (empty when topo -m shows none) and their bit mask, and
    the node's GPU *vendor* (which variable names the GPU)."""

    local_rank: int
    gpu: int
    nics: tuple[str, ...]
    cpus: tuple[int, ...]
    vendor: str = "nvidia"

    @property
    def visible_devices(self) -> str:
        """The variable that shows the rank its GPU: ``CUDA_VISIBLE_DEVICES`` on NVIDIA,
        ``ROCR_VISIBLE_DEVICES`` on AMD (what Slurm itself sets there; HIP_VISIBLE_DEVICES is
        not set beside it, since HIP would then pick among the GPUs ROCr already narrowed to
        one, and index N > 0 would find none)."""
        return "ROCR_VISIBLE_DEVICES" if self.vendor == "amd" else "CUDA_VISIBLE_DEVICES"

    @property
    def cpu_mask(self) -> int:
        """The CPUs as one bit each (CPU c is bit c), what srun's ``mask_cpu:`` takes."""
        return sum(1 << cpu for cpu in self.cpus)

    @property
    def cpu_ranges(self) -> tuple[tuple[int, int], ...]:
        """The CPUs as runs of consecutive ids, for a Linux CPU list (``0-51,104-155``)."""
        return cpu_runs(self.cpus)


def cpu_runs(cpus: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Sorted CPU ids as runs of consecutive ids: ``0, 1, 2, 5`` → ``(0, 2), (5, 5)``."""
    runs: list[tuple[int, int]] = []
    for cpu in sorted(cpus):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1] = (runs[-1][0], cpu)
        else:
            runs.append((cpu, cpu))
    return tuple(runs)
