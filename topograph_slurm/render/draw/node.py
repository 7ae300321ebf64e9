"""The node view as geometry: one node's GPUs inside their NUMA nodes (with the CPUs they are
close to), NVLink or AMD xGMI between GPUs (one NVSwitch bar, or one xGMI hive bar, when every
pair has the same bond), each GPU's
nearest NIC (its rail) with the PCIe path class, the GPU↔NIC pairs that cross NUMA dashed red,
and the whole ``nvidia-smi topo -m`` matrix as coloured cells.

``SYS`` is the path class that crosses the SMP interconnect between NUMA nodes, so a rail
that is ``SYS`` from its GPU is a cross-NUMA pair whatever the affinity columns say.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from topograph_slurm.analysis.nvlink.affinity import AffinityIssue
from topograph_slurm.model.gpu import NV_LINK, XGMI, GpuFabric, GpuTopology, fast_links
from topograph_slurm.render.draw.faults import (
    FAULT_AFFINITY,
    FAULT_MEANING,
    FAULT_NVLINK,
    Fault,
    gpu_faults,
)
from topograph_slurm.render.draw.picture import LegendItem, Line, Picture, Shape, legend

GPU_W, GPU_H, NIC_W, NIC_H, GAP, PAD = 64, 40, 64, 26, 10, 10
LEFT, TOP, NUMA_HEAD, BAR_H, RAIL_H = 300, 40, 28, 16, 70
CELL_W, CELL_H, LABEL_W = 44, 16, 80
#: Link classes of ``topo -m`` and their meaning, closest first.
LINKS: list[tuple[str, str]] = [
    ("lk-nv", "NVLink (NV#: that many bonded links)"),
    ("lk-xgmi", "XGMI: AMD Infinity Fabric between two GPUs"),
    ("lk-pix", "PIX: at most one PCIe bridge"),
    ("lk-pxb", "PXB: several PCIe bridges"),
    ("lk-phb", "PHB: through a PCIe host bridge (the CPU)"),
    ("lk-node", "NODE: between host bridges inside one NUMA node"),
    ("lk-sys", "SYS: across the SMP interconnect between NUMA nodes"),
]
_MEANING: list[tuple[str, str]] = [
    ("numa", "NUMA node (CPU affinity)"),
    ("gpu", "GPU"),
    ("nic", "NIC (a rail)"),
    ("nvswitch", "NVLink between every GPU pair (NVSwitch or full mesh)"),
    ("xgmi-hive", "xGMI between every GPU pair (one AMD hive)"),
    *LINKS,
    ("cross-numa", "GPU↔NIC rail crossing NUMA (SYS)"),
    (f"fault-{FAULT_NVLINK}", FAULT_MEANING[FAULT_NVLINK]),
    (f"fault-{FAULT_AFFINITY}", FAULT_MEANING[FAULT_AFFINITY]),
]


def link_class(token: str) -> str:
    """The CSS class of a ``topo -m`` token (``NV18`` → ``lk-nv``, ``SYS`` → ``lk-sys``;
    rocm-smi's ``XGMI`` → ``lk-xgmi``)."""
    return "lk-nv" if NV_LINK.match(token) else f"lk-{token.lower()}"


def _bar(token: str) -> tuple[str, str]:
    """The every-pair bar's class and label: an NVSwitch's, or an AMD xGMI hive's."""
    if token == XGMI:
        return "xgmi-hive", "xGMI all pairs (one hive)"
    return "nvswitch", f"NVLink {token} all pairs"


def _nic_numa(topology: GpuTopology, nic: str) -> int | None:
    """The NUMA node of the GPUs a NIC is not ``SYS`` from, when they agree."""
    near = topology.near_numas(nic)
    return near.pop() if len(near) == 1 else None


def node_picture(
    name: str,
    topology: GpuTopology,
    gpus: Sequence[GpuFabric] = (),
    affinity: Sequence[AffinityIssue] = (),
) -> Picture:
    """The picture of node *name* from its ``topo -m`` (and its GPUs' NVLink fabric state,
    and the GPU↔NIC affinity findings of the node, on the GPUs and NICs they name)."""
    shapes: list[Shape] = []
    lines: list[Line] = []
    numas = sorted({topology.numa_node(g) for g in topology.gpus}, key=lambda n: (n is None, n))
    faults = gpu_faults(gpus)
    far = _affinity_faults(affinity)
    at: dict[str, tuple[int, int]] = {}  # element -> its box's top-left
    x = LEFT
    gpu_y = TOP + NUMA_HEAD + BAR_H + GAP * 2
    nic_y = gpu_y + GPU_H + RAIL_H
    for numa in numas:
        members = [g for g in topology.gpus if topology.numa_node(g) == numa]
        nics = [n for n in topology.nics if _nic_numa(topology, n) == numa]
        width = max(len(members) * (GPU_W + GAP), len(nics) * (NIC_W + GAP)) + GAP
        cpus = topology.cpu_affinity.get(members[0]) if members else None
        label = "NUMA ?" if numa is None else f"NUMA {numa}"
        tip = f"{label}\nCPUs {cpus or 'unknown'}\nGPUs {', '.join(map(str, members))}"
        shapes.append(
            Shape(
                x,
                TOP,
                width,
                nic_y + NIC_H + GAP - TOP,
                "numa",
                (label, f"CPUs {cpus or '?'}"),
                tip,
                label,
            )
        )
        for i, gpu in enumerate(members):
            at[f"GPU{gpu}"] = (x + GAP + i * (GPU_W + GAP), gpu_y)
            mine = [*faults.get(gpu, []), *far.get(f"GPU{gpu}", [])]
            shapes.append(_gpu(topology, gpu, at[f"GPU{gpu}"], mine))
        for i, nic in enumerate(nics):
            at[nic] = (x + GAP + i * (NIC_W + GAP), nic_y)
            shapes.append(_nic(topology, nic, at[nic], far.get(nic, [])))
        x += width + GAP * 2
    numa_right = x - GAP * 2
    loose = [n for n in topology.nics if n not in at]
    for i, nic in enumerate(loose):  # NICs whose NUMA node the matrix does not tell
        at[nic] = (x + i * (NIC_W + GAP), nic_y)
        shapes.append(_nic(topology, nic, at[nic], far.get(nic, [])))
    right = x + len(loose) * (NIC_W + GAP)
    _nvlink(topology, at, shapes, lines, numa_right)
    _rails(topology, at, lines)
    bottom, matrix_right = _matrix(topology, shapes, nic_y + NIC_H + GAP * 4)
    items = _legend(shapes, lines, faults)
    height = max(bottom, TOP + 16 * (len(items) + 2)) + PAD
    width = max(right, matrix_right, LEFT + 400) + PAD  # the viewBox holds all that is drawn
    return Picture("node", f"node {name}", width, height, shapes, lines, items)


def _affinity_faults(issues: Sequence[AffinityIssue]) -> dict[str, list[Fault]]:
    """Each affinity finding on the GPUs (``GPU3``) and NICs it names."""
    found: dict[str, list[Fault]] = {}
    for issue in issues:
        fault = Fault(FAULT_AFFINITY, f"[{issue.finding.kind}] {issue.finding.message}")
        for element in [*(f"GPU{gpu}" for gpu in issue.gpus), *issue.nics]:
            found.setdefault(element, []).append(fault)
    return found


def _classes(base: str, faults: Sequence[Fault]) -> str:
    """*base* and the fault classes of *faults*, each once."""
    return " ".join([base, *dict.fromkeys(f"fault-{fault.cls}" for fault in faults)])


def _legend(
    shapes: Sequence[Shape], lines: Sequence[Line], faults: Mapping[int, Sequence[object]]
) -> list[LegendItem]:
    """The legend, its NVLink fault row counting the faults (a GPU may have several), not
    the GPUs that carry them."""
    found = sum(map(len, faults.values()))
    return [
        dataclasses.replace(item, count=found) if item.cls == f"fault-{FAULT_NVLINK}" else item
        for item in legend(shapes, lines, _MEANING)
    ]


def _gpu(topology: GpuTopology, gpu: int, at: tuple[int, int], faults: Sequence[Fault]) -> Shape:
    numa = topology.numa_node(gpu)
    rails = ", ".join(topology.closest_nics(gpu)) or "none"
    tip = [
        f"GPU {gpu}",
        f"NUMA {numa if numa is not None else '?'} · CPUs {topology.cpu_affinity.get(gpu) or '?'}",
        f"nearest NIC: {rails} ({topology.closest_link(gpu) or 'no NIC'})",
        *(fault.message for fault in faults),
    ]
    return Shape(
        *at,
        GPU_W,
        GPU_H,
        _classes("gpu", faults),
        (f"GPU{gpu}",),
        "\n".join(tip),
        f"GPU{gpu}",
        "",
        11,
    )


def _nic(topology: GpuTopology, nic: str, at: tuple[int, int], faults: Sequence[Fault]) -> Shape:
    near = [f"GPU{g} {topology.gpu_nic_links[(g, nic)]}" for g in topology.gpus]
    tip = "\n".join([f"NIC {nic}", *near, *(fault.message for fault in faults)])
    return Shape(*at, NIC_W, NIC_H, _classes("nic", faults), (nic,), tip, nic, "", 9)


def _nvlink(
    topology: GpuTopology,
    at: dict[str, tuple[int, int]],
    shapes: list[Shape],
    lines: list[Line],
    right: int,
) -> None:
    """One bar when every pair has the same NVLink (or xGMI) bond, else an arc per linked
    pair; in front of the NUMA boxes, as the rails."""
    tokens = set(topology.gpu_links.values())
    if topology.all_nvlink and len(tokens) == 1:
        token = tokens.pop()
        y = TOP + NUMA_HEAD
        tip = f"every GPU pair: {token}"
        cls, label = _bar(token)
        shapes.append(
            Shape(
                LEFT,
                y,
                right - LEFT - GAP,
                BAR_H,
                cls,
                (label,),
                tip,
                "nvlink",
            )
        )
        for gpu in topology.gpus:
            gx, gy = at[f"GPU{gpu}"]
            lines.append(
                Line(
                    gx + GPU_W // 2,
                    y + BAR_H,
                    gx + GPU_W // 2,
                    gy,
                    link_class(token),
                    f"GPU{gpu}: {token}",
                    front=True,
                )
            )
        return
    for (a, b), token in sorted(topology.gpu_links.items()):
        if not fast_links(token):
            continue
        (ax, ay), (bx, by) = at[f"GPU{a}"], at[f"GPU{b}"]
        bend = 10 + abs(bx - ax) // 6
        lines.append(
            Line(
                ax + GPU_W // 2,
                ay,
                bx + GPU_W // 2,
                by,
                link_class(token),
                f"GPU{a} ↔ GPU{b}: {token}",
                token,
                bend,
                front=True,
            )
        )


def _rails(topology: GpuTopology, at: dict[str, tuple[int, int]], lines: list[Line]) -> None:
    """Each GPU to its nearest NIC(s); dashed red when that path crosses NUMA (SYS). In front
    of the boxes: behind, the opaque NUMA box they lie in would hide them."""
    for gpu in topology.gpus:
        gx, gy = at[f"GPU{gpu}"]
        for nic in topology.closest_nics(gpu):
            token = topology.gpu_nic_links[(gpu, nic)]
            nx, ny = at[nic]
            cls = "cross-numa" if token == "SYS" else link_class(token)
            tip = f"GPU{gpu} → {nic}: {token}" + (" (crosses NUMA)" if token == "SYS" else "")
            lines.append(
                Line(gx + GPU_W // 2, gy + GPU_H, nx + NIC_W // 2, ny, cls, tip, token, front=True)
            )


def _matrix(topology: GpuTopology, shapes: list[Shape], y: int) -> tuple[int, int]:
    """The ``topo -m`` matrix, GPUs then NICs, each cell coloured by its link class; its
    bottom and right edges."""
    labels = [f"GPU{g}" for g in topology.gpus] + list(topology.nics)
    x0 = LEFT + LABEL_W
    for i, label in enumerate(labels):
        shapes.append(
            Shape(x0 + i * CELL_W, y, CELL_W - 1, CELL_H, "label", (label[:8],), label, "", "", 8)
        )
        shapes.append(
            Shape(
                LEFT,
                y + (i + 1) * CELL_H,
                LABEL_W - 2,
                CELL_H - 1,
                "label",
                (label,),
                label,
                "",
                "",
                8,
            )
        )
    for r, row in enumerate(labels):
        for c, col in enumerate(labels):
            token = _cell(topology, row, col)
            cls = "lk-self" if token == "X" else link_class(token)
            shapes.append(
                Shape(
                    x0 + c * CELL_W,
                    y + (r + 1) * CELL_H,
                    CELL_W - 1,
                    CELL_H - 1,
                    cls,
                    (token,),
                    f"{row} ↔ {col}: {token}",
                    "",
                    "",
                    8,
                )
            )
    return y + (len(labels) + 1) * CELL_H, x0 + len(labels) * CELL_W


def _cell(topology: GpuTopology, row: str, col: str) -> str:
    if row == col:
        return "X"
    gpu_of = {f"GPU{g}": g for g in topology.gpus}
    if row in gpu_of and col in gpu_of:
        return topology.link(gpu_of[row], gpu_of[col])
    if row in gpu_of or col in gpu_of:
        gpu, nic = (row, col) if row in gpu_of else (col, row)
        return topology.gpu_nic_links[(gpu_of[gpu], nic)]
    return topology.nic_links.get((row, col)) or topology.nic_links.get((col, row)) or "?"
