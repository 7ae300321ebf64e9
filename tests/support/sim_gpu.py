"""Render GPU fabric data back into nvidia-smi's own text formats, for tests and simulation.

The integration cluster has no GPUs. Its node containers carry a fake ``nvidia-smi`` that
prints what a real one would, so the collector's real code path (srun fan-out, snapshot,
parsers) runs end to end. The renderers here produce exactly the recorded formats — the CSV
fabric query, ``-q`` with Fabric sections, and the ``topo -m`` matrix — and the unit tests
check that :mod:`topograph_slurm.sources.nvidia_smi` reads them back unchanged.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from ClusterShell.RangeSet import RangeSet

from topograph_slurm.model.gpu import GpuFabric, GpuTopology
from topograph_slurm.sources.nvidia_smi import CSV_FIELDS

#: nvidia-smi pads ``<indent><key>`` to this width before ``": "`` in ``-q`` output.
Q_KEY_WIDTH = 42

#: The yes/no Health entries of R570+ drivers, in their print order.
HEALTH_FLAGS = ("Route Recovery in progress", "Route Unhealthy", "Access Timeout Recovery")

_LEGEND = (
    "Legend:",
    "",
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
    "(e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
    "Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
)


# --------------------------------------------------------------------------- builders


def _gpu_uuid(number: int) -> str:
    """A GPU UUID (``GPU-xxxxxxxx-xxxx-…``) derived from *number*, unique per serial."""
    h = f"{number:032x}"[-32:]
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def nvl_node_gpus(
    cluster_uuid: str | None,
    clique_id: int | None,
    count: int = 4,
    *,
    state: str | None = "Completed",
    status: str | None = "Success",
    health: str | None = "Healthy",
    bandwidth: str | None = "Full",
    serial_base: int = 1_650_000_000_000,
) -> list[GpuFabric]:
    """The GPUs of one NVL72-style compute tray, all registered alike (override per test)."""
    return [
        GpuFabric(
            index=i,
            bus_id=f"00000008:{0x01 + 0x40 * i:02X}:00.0",
            serial=str(serial_base + i),
            uuid=_gpu_uuid(serial_base + i),
            state=state,
            status=status,
            clique_id=clique_id,
            cluster_uuid=cluster_uuid,
            health=health,
            health_bandwidth=bandwidth,
        )
        for i in range(count)
    ]


def gb200_tray_topology(gpus: int = 4, nics: Sequence[str] | None = None) -> GpuTopology:
    """A GB200 compute tray as ``topo -m`` shows it: GPUs all-to-all NV18, every NIC SYS
    from every GPU, two Grace sockets (GPUs 0-1 on NUMA 0, 2-3 on NUMA 1)."""
    names = tuple(nics) if nics is not None else tuple(f"mlx5_{i}" for i in range(8))
    half = max(1, gpus // 2)
    return GpuTopology(
        gpus=tuple(range(gpus)),
        nics=names,
        gpu_links={(a, b): "NV18" for a in range(gpus) for b in range(a + 1, gpus)},
        gpu_nic_links={(g, n): "SYS" for g in range(gpus) for n in names},
        nic_links={(a, b): "SYS" for i, a in enumerate(names) for b in names[i + 1 :]},
        cpu_affinity={g: "0-71" if g < half else "72-143" for g in range(gpus)},
        numa_affinity={g: (0,) if g < half else (1,) for g in range(gpus)},
        gpu_numa_id={g: None for g in range(gpus)},
    )


# --------------------------------------------------------------------------- CSV


def _csv_cell(gpu: GpuFabric, name: str) -> str:
    """One value as nvidia-smi prints it: fabric fields bare ``N/A``, others ``[N/A]``."""
    values: dict[str, object] = {
        "index": gpu.index,
        "serial": gpu.serial,
        "uuid": gpu.uuid,
        "pci.bus_id": gpu.bus_id,
        "fabric.clusteruuid": gpu.cluster_uuid,
        "fabric.cliqueid": gpu.clique_id,
        "fabric.state": gpu.state,
        "fabric.status": gpu.status,
    }
    key = name.lower()
    if key not in values:
        raise ValueError(f"cannot render query field {name!r}")
    value = values[key]
    if value is None:
        return "N/A" if key.startswith("fabric.") else "[N/A]"
    return str(value)


def render_query_csv(
    gpus: Iterable[GpuFabric], fields: Sequence[str] = CSV_FIELDS, *, header: bool = False
) -> str:
    """``nvidia-smi --query-gpu=<fields> --format=csv[,noheader]`` output for *gpus*."""
    lines = [", ".join(fields)] if header else []
    lines += [", ".join(_csv_cell(g, f) for f in fields) for g in gpus]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- -q


def _kv(indent: int, key: str, value: object) -> str:
    return f"{' ' * indent + key:<{Q_KEY_WIDTH}}: {value}"


def _na(value: object) -> object:
    return "N/A" if value is None else value


def render_fabric_section(gpu: GpuFabric, indent: int = 4) -> str:
    """The ``Fabric`` block of one GPU, as in ``nvidia-smi -q`` (driver R550+ layout).

    ``Health/Summary`` and the yes/no entries appear only when the GPU has a Summary (or
    a flag set), as on the drivers that report them.
    """
    inner, health = indent + 4, indent + 8
    lines = [
        " " * indent + "Fabric",
        _kv(inner, "State", _na(gpu.state)),
        _kv(inner, "Status", _na(gpu.status)),
        _kv(inner, "CliqueId", _na(gpu.clique_id)),
        _kv(inner, "ClusterUUID", _na(gpu.cluster_uuid)),
        " " * inner + "Health",
    ]
    if gpu.health is not None:
        lines.append(_kv(health, "Summary", gpu.health))
    lines.append(_kv(health, "Bandwidth", _na(gpu.health_bandwidth)))
    if gpu.health is not None or gpu.health_flags:
        for flag in HEALTH_FLAGS:
            lines.append(_kv(health, flag, flag.lower() in gpu.health_flags))
    return "\n".join(lines)


def _gpu_q(gpu: GpuFabric, product: str) -> list[str]:
    bus_id = gpu.bus_id or f"00000000:{0x18 + gpu.index:02X}:00.0"
    return [
        f"GPU {bus_id}",
        _kv(4, "Product Name", product),
        _kv(4, "Serial Number", _na(gpu.serial)),
        _kv(4, "GPU UUID", _na(gpu.uuid)),
        _kv(4, "Minor Number", gpu.index),
        "    PCI",
        _kv(8, "Bus Id", bus_id),
        render_fabric_section(gpu),
        _kv(4, "Processes", "None"),
        "",
    ]


def render_query_q(
    gpus: Sequence[GpuFabric],
    *,
    product: str = "NVIDIA GB200",
    driver: str = "570.124.06",
    cuda: str = "12.8",
    timestamp: str = "Mon Nov 30 04:00:00 2026",
) -> str:
    """An abridged ``nvidia-smi -q``: the real header and per-GPU layout, with only the
    fields our parsers read (identity, PCI bus id, Fabric) plus enough around them to keep
    the indentation structure honest."""
    lines = [
        "==============NVSMI LOG==============",
        "",
        _kv(0, "Timestamp", timestamp),
        _kv(0, "Driver Version", driver),
        _kv(0, "CUDA Version", cuda),
        "",
        _kv(0, "Attached GPUs", len(gpus)),
    ]
    for gpu in gpus:
        lines += _gpu_q(gpu, product)
    return "\n".join(lines)


# --------------------------------------------------------------------------- topo -m


def _ranges(nodes: Sequence[int]) -> str:
    """(0, 2, 3, 4) → ``0,2-4`` (ClusterShell's RangeSet folding); () → ``N/A``."""
    return str(RangeSet.fromlist([str(n) for n in nodes])) if nodes else "N/A"


def _cell(topo: GpuTopology, row: str, col: str, gpu_of: dict[str, int]) -> str:
    if row == col:
        return " X "
    if row in gpu_of and col in gpu_of:
        return topo.link(gpu_of[row], gpu_of[col])
    if row in gpu_of or col in gpu_of:
        gpu, nic = (row, col) if row in gpu_of else (col, row)
        return topo.gpu_nic_links[(gpu_of[gpu], nic)]
    key = (row, col) if (row, col) in topo.nic_links else (col, row)
    return topo.nic_links.get(key, "SYS")


def render_topo_matrix(topo: GpuTopology) -> str:
    """``nvidia-smi topo -m`` as a current driver prints it to a pipe: tab-separated,
    ``NICn`` columns with a NIC Legend, trailing tabs on NIC rows."""
    gpu_of = {f"GPU{g}": g for g in topo.gpus}
    labels = [*gpu_of, *topo.nics]
    heads = [*gpu_of, *(f"NIC{i}" for i in range(len(topo.nics)))]
    lines = ["\t" + "\t".join([*heads, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for label, head in zip(labels, heads, strict=True):
        cells = [_cell(topo, label, col, gpu_of) for col in labels]
        if label in gpu_of:
            g = gpu_of[label]
            numa_id = topo.gpu_numa_id.get(g)
            cells += [
                str(_na(topo.cpu_affinity.get(g))),
                _ranges(topo.numa_affinity.get(g, ())),
                "",
                "N/A" if numa_id is None else str(numa_id),
            ]
        else:
            cells += ["", "", "", ""]
        lines.append("\t".join([head, *cells]))
    lines += ["", *_LEGEND]
    if topo.nics:
        lines += ["", "NIC Legend:", ""]
        lines += [f"  NIC{i}: {name}" for i, name in enumerate(topo.nics)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- fake binary

_EOF = "__TOPOGRAPH_SLURM_EOF__"


def _heredoc(text: str) -> str:
    if any(line == _EOF for line in text.splitlines()):
        raise ValueError(f"output contains the heredoc delimiter {_EOF}")
    body = text if text.endswith("\n") else text + "\n"
    return f"cat <<'{_EOF}'\n{body}{_EOF}\n"


def fake_nvidia_smi_script(
    *, csv: str | None = None, query: str | None = None, topo: str | None = None
) -> str:
    """A POSIX ``sh`` script that behaves like ``nvidia-smi`` for the commands we collect.

    ``--query-gpu=…`` prints *csv* (whatever fields were asked for), ``topo …`` prints
    *topo*, ``-q``/``--query`` prints *query*; anything else, or an output not given, exits
    non-zero with a message on stderr like a missing feature would.
    """
    branches = [("*--query-gpu*", csv), ("*topo*", topo), ("*-q*|*--query*", query)]
    out = [
        "#!/bin/sh",
        "# fake nvidia-smi written by topograph_slurm.sources.sim_gpu",
        'case " $* " in',
    ]
    for pattern, text in branches:
        if text is not None:
            out.append(f"{pattern})\n{_heredoc(text)};;")
    unsupported = shlex.quote("fake nvidia-smi: unsupported arguments:")
    out.append(f'*) echo {unsupported} "$*" >&2; exit 2;;')
    out.append("esac")
    return "\n".join(out) + "\n"


def near_cpus_topology(affinities: Sequence[str]) -> GpuTopology:
    """A PCIe-only node whose GPU *i* is near the CPU list ``affinities[i]`` (its own NUMA
    node *i*), GPUs apart over SYS, no NICs: the binding check's node where no real capture
    has the few CPUs a test machine has."""
    gpus = tuple(range(len(affinities)))
    return GpuTopology(
        gpus=gpus,
        nics=(),
        gpu_links={(a, b): "SYS" for a in gpus for b in gpus if a < b},
        gpu_nic_links={},
        cpu_affinity=dict(enumerate(affinities)),
        numa_affinity={g: (g,) for g in gpus},
    )
