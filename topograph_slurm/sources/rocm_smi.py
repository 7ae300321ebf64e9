"""``rocm-smi --showtopo`` and ``amd-smi topology`` (AMD Instinct nodes) → :class:`GpuTopology`,
the model ``nvidia-smi topo -m`` fills on NVIDIA nodes.

The output is four sections under ``=== … ===`` banners: the weight, hops and link-type
matrices between GPUs and the NUMA node of each GPU. Only the link types and the NUMA nodes
are read: an ``XGMI`` pair is an Infinity Fabric link (the node's fast domain, as NVLink is on
NVIDIA; rocm-smi gives no link count), a ``PCIE`` pair is a PCIe path, kept as ``topo -m``'s
``NODE`` when both GPUs hang off one NUMA node and ``SYS`` otherwise, so everything that
compares PCIe paths reads both vendors alike. Hops and weights are not read: rocm-smi reports
1 hop for every xGMI pair, directly linked or not (ROCm/rocm-systems#5763).

rocm-smi names no NIC and no CPU list, so the topology has no NICs and no CPU affinity; the
NUMA node is each GPU's ``Numa Affinity`` (``Numa Node`` when that is missing; a negative
value, NUMA off, is none). Lines may be ``GPU[0]`` or ``GPU 0``, blanks collapsed or not, with
warnings between the banners: all are read the same.

``amd-smi topology`` (rocm-smi's successor) prints ``NAME TABLE:`` sections keyed by each GPU's
PCI address, rows in GPU index order; its ``LINK TYPE TABLE`` (``SELF``, ``XGMI``, ``PCIE``) is
read the same way. It prints no NUMA node, so its PCIe pairs are all ``SYS`` (not known to be
nearer). Pure: text in, model out.
"""

from __future__ import annotations

import re

from topograph_slurm.errors import ParseError
from topograph_slurm.model.gpu import XGMI, GpuTopology

_BANNER = re.compile(r"^=+\s*(.*?)\s*=+\s*$")
_NUMA = re.compile(
    r"^GPU\s*\[?(\d{1,4})\]?\s*:\s*\(Topology\)\s*Numa (Node|Affinity):\s*(-?\d{1,6})\s*$",
    re.ASCII,
)
_GPU_LABEL = re.compile(r"^GPU(\d{1,4})$", re.ASCII)
#: ``rocm-smi --showproduct``: ``GPU[0]          : Card Series:          AMD Instinct MI300X OAM``
_SERIES = re.compile(r"^GPU\s*\[?(\d{1,4})\]?\s*:\s*Card [Ss]eries:\s*(\S.*?)\s*$", re.ASCII)
_LINK_SECTION = "Link Type between two GPUs"
_AMDSMI_LINKS = "LINK TYPE TABLE:"
_AMDSMI_TABLE = re.compile(r"^[A-Z][A-Z -]+ TABLE:\s*$")
_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.ASCII)
_PCIE = "PCIE"


def _sections(text: str) -> dict[str, list[str]]:
    """Each banner's title → the non-blank lines under it (until the next banner)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        banner = _BANNER.match(line)
        if banner:
            current = sections.setdefault(banner.group(1), [])
        elif current is not None and line.strip():
            current.append(line)
    return sections


def _gpus(header: str) -> tuple[int, ...]:
    """The matrix header's ``GPU0 GPU1 …`` as indices."""
    return tuple(int(label[3:]) for label in header.split())


def _link_matrix(lines: list[str]) -> tuple[tuple[int, ...], dict[tuple[int, int], str]]:
    """The link-type matrix: GPU indices and each unordered pair's token (XGMI or PCIE)."""
    headers = [line for line in lines if all(_GPU_LABEL.match(word) for word in line.split())]
    if not headers:
        raise ParseError("rocm-smi --showtopo: the link type matrix has no GPU header")
    gpus = _gpus(headers[0])
    rows = [line for line in lines if line is not headers[0]]
    cells: dict[tuple[int, int], str] = {}
    for line in rows:
        label, *values = line.split()
        if not _GPU_LABEL.match(label):
            raise ParseError(f"rocm-smi --showtopo: {label!r} is not a GPU row")
        gpu = int(label[3:])
        if len(values) != len(gpus):
            raise ParseError(
                f"rocm-smi --showtopo: row {label} has {len(values)} cells for {len(gpus)} GPUs"
            )
        for peer, token in zip(gpus, values, strict=True):
            if peer == gpu:
                continue
            if token not in (XGMI, _PCIE):
                raise ParseError(f"rocm-smi --showtopo: {label}→GPU{peer}: unknown link {token!r}")
            pair = (min(gpu, peer), max(gpu, peer))
            if cells.setdefault(pair, token) != token:
                where = f"GPU{pair[0]}↔GPU{pair[1]}"
                raise ParseError(f"rocm-smi --showtopo: {where} differ by direction")
    if {g for pair in cells for g in pair} - set(gpus) or len(rows) != len(gpus):
        raise ParseError("rocm-smi --showtopo: the link matrix is not square")
    return gpus, cells


def _numa(lines: list[str]) -> dict[int, int | None]:
    """Each GPU's NUMA node: its Numa Affinity, else its Numa Node; negative → None."""
    node: dict[int, int] = {}
    affinity: dict[int, int] = {}
    for line in lines:
        match = _NUMA.match(line.strip())
        if match:
            target = affinity if match.group(2) == "Affinity" else node
            target[int(match.group(1))] = int(match.group(3))
    merged = {**node, **affinity}
    return {gpu: (value if value >= 0 else None) for gpu, value in merged.items()}


def _pcie_class(a: int | None, b: int | None) -> str:
    """A PCIe pair as ``topo -m`` would class it: NODE inside one NUMA node, else SYS."""
    return "NODE" if a is not None and a == b else "SYS"


def parse_showproduct(text: str) -> dict[int, str]:
    """``rocm-smi --showproduct`` (or ``--showproductname``) → each GPU's card series (the
    product name gres' Type= is made from), by GPU index; lines indented or not."""
    found = {}
    for line in text.splitlines():
        match = _SERIES.match(line.strip())
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def looks_like_showproduct(text: str) -> bool:
    """Is *text* rocm-smi's product listing, not ``nvidia-smi -q``?"""
    return "Product Info" in text or bool(re.search(r"Card [Ss]eries:", text))


def looks_like_showtopo(text: str) -> bool:
    """Is *text* rocm-smi's or amd-smi's (a link-type banner), not ``nvidia-smi topo -m``?"""
    return _LINK_SECTION in text or _AMDSMI_LINKS in text


def _amdsmi_links(text: str) -> list[str]:
    """The lines of ``amd-smi topology``'s link type table (to the next table or the end)."""
    lines: list[str] = []
    inside = False
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if _AMDSMI_TABLE.match(line):
            inside = line == _AMDSMI_LINKS
        elif inside and line:
            lines.append(line)
    return lines


def parse_amdsmi_topology(text: str) -> GpuTopology:
    """``amd-smi topology`` → the node's GPU topology (GPU N: the Nth row), ``vendor="amd"``;
    ParseError when the link type table is missing or does not read."""
    lines = _amdsmi_links(text)
    if not lines:
        raise ParseError(f"amd-smi topology: no {_AMDSMI_LINKS!r} table")
    header = lines[0].split()
    if not header or not all(_BDF.match(bdf) for bdf in header):
        raise ParseError("amd-smi topology: the link type table has no PCI address header")
    index = {bdf: i for i, bdf in enumerate(header)}
    cells: dict[tuple[int, int], str] = {}
    for line in lines[1:]:
        bdf, *values = line.split()
        if bdf not in index or len(values) != len(header):
            raise ParseError(f"amd-smi topology: row {bdf!r} does not match the header")
        for peer, token in zip(header, values, strict=True):
            a, b = index[bdf], index[peer]
            if a == b:
                continue
            if token not in (XGMI, _PCIE):
                raise ParseError(f"amd-smi topology: {bdf}→{peer}: unknown link {token!r}")
            if cells.setdefault((min(a, b), max(a, b)), token) != token:
                raise ParseError(f"amd-smi topology: {bdf}↔{peer} differ by direction")
    if len(lines) - 1 != len(header):
        raise ParseError("amd-smi topology: the link type table is not square")
    links = {pair: token if token == XGMI else "SYS" for pair, token in cells.items()}
    gpus = tuple(range(len(header)))
    return GpuTopology(gpus=gpus, nics=(), gpu_links=links, gpu_nic_links={}, vendor="amd")


def parse_showtopo(text: str) -> GpuTopology:
    """``rocm-smi --showtopo`` (or ``--showtopotype`` plus ``--showtoponuma``; or
    ``amd-smi topology``, :func:`parse_amdsmi_topology`) → the node's GPU topology,
    ``vendor="amd"``. ParseError when there is no link-type matrix or it does not read:
    without it the node's GPUs are unknown."""
    if _AMDSMI_LINKS in text and _LINK_SECTION not in text:
        return parse_amdsmi_topology(text)
    sections = _sections(text)
    lines = sections.get(_LINK_SECTION)
    if not lines:
        raise ParseError(f"rocm-smi --showtopo: no {_LINK_SECTION!r} section")
    gpus, cells = _link_matrix(lines)
    numa = _numa(sections.get("Numa Nodes", []))
    links = {
        pair: token if token == XGMI else _pcie_class(numa.get(pair[0]), numa.get(pair[1]))
        for pair, token in cells.items()
    }
    return GpuTopology(
        gpus=gpus,
        nics=(),
        gpu_links=links,
        gpu_nic_links={},
        numa_affinity={gpu: (node,) for gpu in gpus if (node := numa.get(gpu)) is not None},
        vendor="amd",
    )
