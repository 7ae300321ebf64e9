"""``gres.conf`` from what ``nvidia-smi topo -m`` measured: one line per GPU with its NUMA
node's cores and its NVLink links, identical nodes folded into one ``NodeName=`` hostlist.

**Cores=** is not a list of Linux CPU ids. Slurm reads it as *core* indices in its own
abstract numbering (gres.conf(5): a logical core index, core 0 the first core of the first
socket, as ``lstopo -l`` shows ``Core L#``), and with hyperthreads only the cores are named,
not their second threads. ``topo -m``'s CPU Affinity lists Linux CPU ids, hyperthreads
included (``0-51,104-155``). On the x86 and Grace servers GPUs come in, Linux numbers the
first thread of every core first, socket by socket (CPU id = Slurm's core index), then the
second threads in the same order (CPU id = core index + number of cores). So:

* two ranges of equal length whose second starts the same distance after the first on every
  GPU (``0-51,104-155`` and ``52-103,156-207``) are one core's two threads: the distance is
  the node's core count and a CPU id ``c`` is core ``c mod cores`` (cores 0-51 and 52-103);
* anything else is taken as one thread per core (CPU id = core index), unless the caller
  says the node's threads per core.

Slurm 24.11+ takes a GPU's Cores= only as **one whole socket** or every core
(``_check_core_range_matches_sock`` in src/interfaces/gres.c: "doesn't match socket
boundaries"), unless ``SlurmdParameters=numa_node_as_socket`` makes each NUMA node a socket.
So a GPU's NUMA node cores are widened to the socket holding them (a DGX A100 in NPS4 has NUMA
nodes of 16 cores in sockets of 64), and a GPU whose cores span sockets gets no Cores=. The
sockets are the caller's (the node line's ``Sockets=``), else two when the node's NUMA nodes
split evenly into two halves (the dual-socket servers GPUs come in), else one. A node whose
GPUs all share one CPU affinity (NUMA off lists ``0-191`` for every GPU of a 96-core node; a
workstation) gets no Cores=: any core can be used, and naming its threads as cores would name
cores the node does not have.

**File=** is ``/dev/nvidiaN`` on NVIDIA, and on AMD ``/dev/dri/renderD<128+N>``: the render
node Slurm's rsmi plugin names for GPU N (it walks GPUs in ROCm SMI's index order, the order
``rocm-smi`` prints, and notes when a GPU's render minor is not 128+N; ``--showtopo`` does not
print the minors, so 128+N is what a capture can give).

**Links=** follows Slurm's own NVML detection: one number per GPU index, ``-1`` for the GPU
itself, the count of bonded NVLinks (``NV18`` → 18) to a peer, ``0`` for a PCIe path (Slurm
treats more links as the better connection when it picks GPUs for a job). A node without
any NVLink gets no Links= at all: there is nothing better to prefer. On AMD an xGMI pair counts
1 (rocm-smi gives no link count); Slurm's rsmi plugin itself writes no link counts (only -1
and 0, to keep PCI order), so these Links= are what lets Slurm prefer GPUs of one xGMI hive.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology, GresDevice, GresGroup, GresPlan
from topograph_slurm.model.names import fold, natural_key
from topograph_slurm.model.result import Finding

_RANGE = re.compile(r"^(\d{1,6})(?:-(\d{1,6}))?$", re.ASCII)
_VENDOR = frozenset({"nvidia", "tesla", "geforce", "quadro"})
_UNSAFE = re.compile(r"[^a-z0-9.-]+")
#: An AMD Instinct model word (``MI300X``, ``[Instinct MI300A]``'s ``MI300A]``).
_AMD_MODEL = re.compile(r"^\[?(mi\d+[a-z0-9]*)\]?$", re.ASCII)


def cpu_ranges(text: str) -> list[tuple[int, int]]:
    """``0-51,104-155`` → ``[(0, 51), (104, 155)]``; a malformed list is an InputError."""
    ranges = []
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise InputError(f"CPU affinity {text!r} is not a list of CPU ranges")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first:
            raise InputError(f"CPU affinity {text!r}: range {part.strip()!r} runs backwards")
        ranges.append((first, last))
    return ranges


def _sibling_offset(affinities: list[list[tuple[int, int]]]) -> int | None:
    """The node's core count when every GPU's CPUs are two equal ranges the same distance
    apart (first threads, then their siblings); None otherwise."""
    offsets = set()
    for ranges in affinities:
        if len(ranges) != 2:
            return None
        (a0, a1), (b0, b1) = ranges
        if a1 - a0 != b1 - b0 or b0 <= a1:
            return None
        offsets.add(b0 - a0)
    return offsets.pop() if len(offsets) == 1 else None


def core_count(topo: GpuTopology, threads_per_core: int | None = None) -> int | None:
    """How many cores the node has, for ``c mod cores``; None means CPU id = core index."""
    texts = [t for t in topo.cpu_affinity.values() if t]
    affinities = [cpu_ranges(t) for t in texts]
    if threads_per_core is not None and threads_per_core > 1 and affinities:
        cpus = max(last for ranges in affinities for _, last in ranges) + 1
        return max(cpus // threads_per_core, 1)
    if threads_per_core == 1:
        return None
    return _sibling_offset(affinities)


def gpu_cores(text: str | None, cores: int | None) -> tuple[int, ...] | None:
    """Slurm core indices of one GPU's CPU affinity (see the module's docstring)."""
    if not text:
        return None
    cpus = {c for first, last in cpu_ranges(text) for c in range(first, last + 1)}
    return tuple(sorted({c % cores for c in cpus} if cores else cpus))


def gpu_links(topo: GpuTopology, gpu: int) -> tuple[int, ...]:
    """Slurm's Links= of *gpu*: -1 itself, NVLink count to each peer, 0 over PCIe."""
    return tuple(-1 if peer == gpu else topo.nvlinks(gpu, peer) for peer in topo.gpus)


def gres_type(product: str) -> str:
    """A Slurm-safe ``Type=`` from nvidia-smi's Product Name: the model word, lower-cased,
    without the vendor (``NVIDIA H100 80GB HBM3`` → ``h100``, ``NVIDIA A100-SXM4-80GB`` →
    ``a100-sxm4-80gb``); a model word without a digit takes the next word too (``NVIDIA RTX
    6000 Ada Generation`` → ``rtx_6000``). An AMD card series gives its Instinct model
    (``AMD Instinct MI300X OAM`` → ``mi300x``, ``Aqua Vanjaram [Instinct MI300A]`` →
    ``mi300a``)."""
    amd = [m.group(1) for w in product.lower().split() if (m := _AMD_MODEL.match(w))]
    if amd:
        return amd[0]
    words = [w for w in product.lower().split() if w not in _VENDOR] or ["gpu"]
    if not any(ch.isdigit() for ch in words[0]) and len(words) > 1:
        words = [f"{words[0]}_{words[1]}"]
    return _UNSAFE.sub("_", words[0]).strip("_") or "gpu"


@dataclass(frozen=True, slots=True)
class CoreLayout:
    """What the node line says about cores that ``topo -m`` cannot: hardware threads per core,
    sockets (``Sockets=``), and whether slurm.conf sets ``numa_node_as_socket`` (None: infer
    threads and sockets as the module says)."""

    threads_per_core: int | None = None
    sockets: int | None = None
    numa_node_as_socket: bool = False


def node_devices(
    topo: GpuTopology, products: Mapping[int, str], layout: CoreLayout | None = None
) -> tuple[GresDevice, ...]:
    """Every GPU of one node as its gres.conf line. A node without GPUs is an InputError:
    there is nothing to describe and a gres.conf without its GPUs would hide them."""
    if not topo.gpus:
        raise InputError("the GPU topology (nvidia-smi topo -m, rocm-smi --showtopo) lists no GPUs")
    layout = layout or CoreLayout()
    cores = core_count(topo, layout.threads_per_core)
    numa = {gpu: gpu_cores(topo.cpu_affinity.get(gpu), cores) for gpu in topo.gpus}
    socket_cores = _whole_sockets(numa, cores, layout)
    has_nvlink = any(topo.nvlinks(a, b) for a, b in topo.gpu_links)
    return tuple(
        GresDevice(
            gpu,
            gres_type(products[gpu]) if gpu in products else None,
            socket_cores[gpu],
            gpu_links(topo, gpu) if has_nvlink else None,
            device_file(topo, gpu),
        )
        for gpu in topo.gpus
    )


def device_file(topo: GpuTopology, gpu: int) -> str:
    """The GPU's device file as Slurm's GPU plugins name it (see the module's File=)."""
    return f"/dev/dri/renderD{128 + gpu}" if topo.vendor == "amd" else f"/dev/nvidia{gpu}"


def _whole_sockets(
    numa: Mapping[int, tuple[int, ...] | None], cores: int | None, layout: CoreLayout
) -> dict[int, tuple[int, ...] | None]:
    """Each GPU's Cores= as Slurm 24.11+ takes it: its socket's cores (its NUMA node's when
    NUMA nodes are Slurm's sockets), None when any core can be used or it has no affinity."""
    known = {found for found in numa.values() if found}
    if len(known) < 2:  # one affinity for every GPU (or none): any core can be used
        return dict.fromkeys(numa)
    if layout.numa_node_as_socket:
        return dict(numa)
    total = cores or max(max(found) for found in known) + 1
    sockets = layout.sockets or _sockets(total, min(map(len, known)))
    if total % sockets:
        raise UsageError(f"--sockets {sockets} does not divide the node's {total} cores")
    per = total // sockets
    out: dict[int, tuple[int, ...] | None] = {}
    for gpu, found in numa.items():
        held = sorted({core // per for core in found}) if found else []
        one = len(held) == 1 and per < total  # every core is no socket of its own
        out[gpu] = tuple(range(held[0] * per, (held[0] + 1) * per)) if one else None
    return out


def _sockets(cores: int, numa_size: int) -> int:
    """Sockets when the caller does not say: two when the node's NUMA nodes split evenly into
    two halves (dual-socket GPU servers, NPS1 to NPS4, SNC off or on), else one."""
    numa_nodes = cores // max(numa_size, 1)
    return 2 if numa_nodes >= 2 and numa_nodes % 2 == 0 else 1


def _kind(devices: tuple[GresDevice, ...]) -> tuple[int, tuple[str | None, ...]]:
    """A node's type: its GPU count and GPU types; layouts are compared within a type."""
    return len(devices), tuple(d.type for d in devices)


def plan(nodes: Mapping[str, tuple[GresDevice, ...]]) -> GresPlan:
    """Fold nodes with identical lines into groups; within a type (GPU count and types) the
    most common layout is the type's, and each node that differs from it is a finding."""
    by_layout: dict[tuple[GresDevice, ...], list[str]] = defaultdict(list)
    for name in sorted(nodes, key=natural_key):
        by_layout[nodes[name]].append(name)
    groups = [GresGroup(tuple(names), layout) for layout, names in by_layout.items()]
    groups.sort(key=lambda g: natural_key(g.nodes[0]))
    return GresPlan(tuple(groups), tuple(_differing(groups)), _notes(groups))


def _differing(groups: list[GresGroup]) -> list[Finding]:
    typed: dict[tuple[int, tuple[str | None, ...]], list[GresGroup]] = defaultdict(list)
    for group in groups:
        typed[_kind(group.devices)].append(group)
    findings = []
    for members in typed.values():
        usual = max(members, key=lambda g: (len(g.nodes), -members.index(g)))
        for group in members:
            if group is usual:
                continue
            what = _difference(usual.devices, group.devices)
            for node in group.nodes:
                message = f"{what} than the other nodes of its type ({fold(usual.nodes)})"
                findings.append(Finding(FindingKind.GRES_LAYOUT_DIFFERS, node, message))
    return sorted(findings, key=lambda f: natural_key(f.subject))


def _difference(usual: tuple[GresDevice, ...], node: tuple[GresDevice, ...]) -> str:
    """Which GPUs differ and in what: ``GPU3: other cores, other links``."""
    parts = []
    for mine, theirs in zip(node, usual, strict=True):
        what = [name for name in ("cores", "links") if getattr(mine, name) != getattr(theirs, name)]
        if what:
            parts.append(f"GPU{mine.index}: other {' and '.join(what)}")
    return "; ".join(parts)


def _notes(groups: list[GresGroup]) -> tuple[str, ...]:
    """What the file leaves out and why, once per kind of gap."""
    devices = [d for g in groups for d in g.devices]
    notes = []
    untyped = [n for g in groups if any(d.type is None for d in g.devices) for n in g.nodes]
    if untyped:
        notes.append(
            f"no Type= for {fold(sorted(untyped, key=natural_key))}: only the GPU topology "
            "is known (collect nvidia-smi -q, or AMD's rocm-smi --showproduct, for the GPU's "
            "product name)"
        )
    if any(d.cores is None for d in devices):
        notes.append(
            "no Cores= where any core can be used (every GPU has the same CPU affinity, or a "
            "GPU's cores span sockets) or the topology shows no CPU affinity (nvidia-smi "
            "topo -m without it; rocm-smi --showtopo never prints it)"
        )
    if any(d.file.startswith("/dev/dri/") for d in devices):
        notes.append(
            "AMD File= are /dev/dri/renderD<128+index>, the minors Slurm's rsmi plugin "
            "expects; check them against ls -l /sys/class/drm/renderD*/device on the node"
        )
    return tuple(notes)
