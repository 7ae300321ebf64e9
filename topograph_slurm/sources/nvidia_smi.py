"""Parsers for what ``nvidia-smi`` says about a node's NVLink fabric and GPU/NIC layout.

Three outputs are read, each as text captured on a node (by the collector or by hand):

* ``nvidia-smi -q``: per-GPU ``Fabric`` sections (State, Status, CliqueId, ClusterUUID,
  Health). Besides the full report we accept the fragments people actually paste and
  collectors produce: ``grep -C`` excerpts with ``--`` separators, blocks de-indented by a
  forum post, a bare Fabric block without the ``GPU 0000…`` header.
* ``nvidia-smi --query-gpu=index,serial,fabric.clusterUuid,fabric.cliqueId,fabric.state,
  fabric.status --format=csv,noheader``: the cheap, stable form the collector prefers; also
  the two-column ``--query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader``
  that NVIDIA topograph runs (``pkg/accelerator/nvidia_smi.go``), one ``<uuid>, <clique>``
  line per GPU, without State, Status or Health.
* ``nvidia-smi topo -m`` (and ``-mp``): the GPU/NIC link matrix, CPU/NUMA affinity and the
  NIC legend — GPUs per node, NVLink all-to-all or not, and which NIC is each GPU's rail.

The parsers are pure (text in, dataclasses out) and raise only :class:`ParseError`, so one
node's garbage output becomes a finding for that node instead of aborting a cluster-wide run.
Values nvidia-smi reports as unavailable (``N/A``, ``[N/A]``, ``[Not Supported]``, any
``[…]`` error token) become ``None``; judging them is the job of ``topology/clique.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from topograph_slurm.errors import ParseError
from topograph_slurm.model.gpu import NV_LINK, PCIE_RANK, GpuFabric, GpuTopology

SRC_Q = "nvidia-smi -q"
SRC_CSV = "nvidia-smi --query-gpu"
SRC_TOPO = "nvidia-smi topo -m"

#: Column order of the CSV query the collector runs (and :func:`parse_query_csv` assumes
#: when the output has no header line).
CSV_FIELDS: tuple[str, ...] = (
    "index",
    "serial",
    "fabric.clusterUuid",
    "fabric.cliqueId",
    "fabric.state",
    "fabric.status",
)

#: NVIDIA topograph's query (``fabric.clusterUuid,fabric.cliqueId``): ClusterUUID and
#: CliqueId only, so a registration's state and health are not known.
TOPOGRAPH_FIELDS: tuple[str, ...] = ("fabric.clusterUuid", "fabric.cliqueId")

#: Header-less outputs told apart by their column count.
_HEADERLESS = {len(CSV_FIELDS): CSV_FIELDS, len(TOPOGRAPH_FIELDS): TOPOGRAPH_FIELDS}


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
_KEY_VALUE = re.compile(r"^([^:]*[^:\s])\s*:\s*(.*)$")
#: A ClusterUUID as the readers hand it on (lowercase): it becomes part of block names.
CLUSTER_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_UNSIGNED = re.compile(r"^\d{1,10}$")
_NA_WORDS = frozenset({"", "n/a", "none", "not available"})
_FABRIC_KEYS = frozenset({"state", "status", "cliqueid", "clusteruuid"})


# --------------------------------------------------------------------------- data


# --------------------------------------------------------------------------- helpers


def _clean_lines(text: str) -> list[str]:
    """Lines without ANSI escapes, CR or trailing blanks/tabs; tabs expanded for indents."""
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [line.rstrip().expandtabs(8) for line in text.split("\n")]


def _value(raw: str) -> str | None:
    """nvidia-smi's value with its "not available" spellings mapped to None.

    Any bracketed token (``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``) is how the CSV
    and ``-q`` outputs say "no value"; the state word itself (``Not Supported``) is kept.
    """
    value = raw.strip()
    if value.lower() in _NA_WORDS or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _clique(raw: str | None, where: str, line: int | None) -> int | None:
    """CliqueId as a non-negative int; anything non-numeric is malformed input."""
    value = _value(raw) if raw is not None else None
    if value is None:
        return None
    if not _UNSIGNED.match(value):
        raise ParseError(f"CliqueId {value!r} is not a non-negative integer", line, where)
    return int(value)


def _cluster_uuid(raw: str | None, where: str, line: int | None) -> str | None:
    """ClusterUUID normalised to lowercase; it becomes part of block names, so it must be a
    well-formed UUID rather than whatever text happened to follow the colon."""
    value = _value(raw) if raw is not None else None
    if value is None:
        return None
    lowered = value.lower()
    if not CLUSTER_UUID.match(lowered):
        raise ParseError(f"ClusterUUID {value!r} is not a UUID", line, where)
    return lowered


# --------------------------------------------------------------------------- nvidia-smi -q


@dataclass(slots=True)
class _Block:
    """Key/values of one Fabric block while it is being read."""

    line: int
    bus_id: str | None = None
    serial: str | None = None
    uuid: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    health: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _GpuSection:
    """The ``GPU 0000…`` section a Fabric block belongs to, in full ``-q`` output."""

    line: int
    bus_id: str
    serial: str | None = None
    uuid: str | None = None
    fabric: _Block | None = None


def _field_key(raw: str) -> str:
    """``ClusterUUID``, ``Cluster UUID`` and ``clusteruuid`` are one key."""
    return raw.replace(" ", "").lower()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


class _QReader:
    """Line-by-line reader of ``-q`` text; indentation decides what belongs to what."""

    def __init__(self) -> None:
        self.gpus: list[_GpuSection] = []
        self.orphans: list[_Block] = []  # Fabric blocks outside any GPU section (fragments)
        self.block: _Block | None = None
        self.block_indent = 0
        self.sub: tuple[str, int] | None = None
        self.products: dict[int, str] = {}  # Product Name by GPU section, in the same pass

    def _end_block(self) -> None:
        self.block, self.sub = None, None

    def _start_block(self, lineno: int, indent: int) -> None:
        block = _Block(line=lineno)
        gpu = self.gpus[-1] if self.gpus else None
        if gpu is not None and gpu.fabric is None:
            gpu.fabric = block
        elif gpu is None:
            self.orphans.append(block)
        else:
            return  # a second Fabric block in one GPU section: keep the first
        self.block, self.block_indent = block, indent

    def _fabric_line(self, stripped: str, indent: int) -> None:
        assert self.block is not None
        match = _KEY_VALUE.match(stripped)
        if match is None:  # a sub-section header such as "Health"
            self.sub = (stripped.lower(), indent)
            return
        key, value = _field_key(match.group(1)), match.group(2)
        if self.sub is not None and indent > self.sub[1]:
            if self.sub[0] == "health":
                self.block.health.setdefault(match.group(1).strip().lower(), value)
            return
        self.sub = None
        self.block.fields.setdefault(key, value)

    def _gpu_line(self, stripped: str) -> None:
        match = _KEY_VALUE.match(stripped)
        if match is None or not self.gpus:
            return
        gpu, key, value = self.gpus[-1], match.group(1).strip(), match.group(2)
        if key == "Serial Number" and gpu.serial is None:
            gpu.serial = _value(value)
        elif key == "GPU UUID" and gpu.uuid is None:
            gpu.uuid = _value(value)

    def _product(self, stripped: str) -> None:
        match = _KEY_VALUE.match(stripped)
        if match and match.group(1).strip() == "Product Name":
            value = _value(match.group(2))
            if value is not None:
                self.products.setdefault(len(self.gpus) - 1, value)

    def feed(self, lineno: int, line: str) -> None:
        stripped = line.strip()
        if not stripped:
            return
        if self.gpus and "Product Name" in stripped:
            self._product(stripped)
        if stripped == "--":
            self._end_block()
            return
        header = _GPU_HEADER.match(stripped)
        if header:
            self._end_block()
            self.gpus.append(_GpuSection(line=lineno, bus_id=header.group(1).upper()))
            return
        indent = _indent(line)
        if self.block is not None and indent <= self.block_indent:
            self._end_block()
        if self.block is not None:
            self._fabric_line(stripped, indent)
        elif stripped == "Fabric":
            self._start_block(lineno, indent)
        else:
            self._gpu_line(stripped)


def _headerless_blocks(lines: list[str]) -> list[_Block]:
    """Fabric key/values from a fragment cut without its ``Fabric`` line (``grep -A``).

    Groups are split at ``--`` and wherever a key repeats; a group is a GPU only if it
    names a CliqueId or ClusterUUID, so stray ``State`` lines elsewhere are not GPUs.
    """
    blocks: list[_Block] = []
    current: _Block | None = None
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        match = _KEY_VALUE.match(stripped)
        key = _field_key(match.group(1)) if match else ""
        if stripped == "--" or (current is not None and key in current.fields):
            current = None
        if match is None or key not in _FABRIC_KEYS:
            continue
        if current is None:
            current = _Block(line=lineno)
            blocks.append(current)
        current.fields[key] = match.group(2)
    return [b for b in blocks if "cliqueid" in b.fields or "clusteruuid" in b.fields]


def _to_fabric(index: int, block: _Block | None, gpu: _GpuSection | None) -> GpuFabric:
    """Validate one block's raw strings into a :class:`GpuFabric`."""
    fields = block.fields if block else {}
    health = block.health if block else {}
    line = block.line if block else (gpu.line if gpu else None)
    return GpuFabric(
        index=index,
        bus_id=gpu.bus_id if gpu else None,
        serial=gpu.serial if gpu else None,
        uuid=gpu.uuid if gpu else None,
        state=_value(fields.get("state", "")),
        status=_value(fields.get("status", "")),
        clique_id=_clique(fields.get("cliqueid"), SRC_Q, line),
        cluster_uuid=_cluster_uuid(fields.get("clusteruuid"), SRC_Q, line),
        health=_value(health.get("summary", "")),
        health_bandwidth=_value(health.get("bandwidth", "")),
        health_flags=tuple(sorted(k for k, v in health.items() if v.strip().lower() == "true")),
    )


#: What the lines that matter outside a Fabric block hold: a ``GPU 0000…`` header, ``GPU
#: UUID``, ``Fabric``, ``Serial Number``, ``Product Name``. Every other line outside a block
#: changes nothing (``--`` only ends a block), so the reader does not look at it. One pattern
#: each: a pattern that starts with a literal is searched for at C speed, an alternation not.
_MATTERS = tuple(
    re.compile(pattern)
    for pattern in (
        r"GPU\s+[0-9A-Fa-f]{4,8}:",
        "GPU UUID",
        "Fabric",
        "Serial Number",
        "Product Name",
    )
)


def _cleaned(text: str) -> str:
    """*text* without ANSI escapes, every line break a ``\\n`` (what :func:`_clean_lines`
    splits; each line's own clean-up is left to whoever reads the line)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _scan(text: str) -> _QReader:
    """One pass over ``-q`` text feeding :class:`_QReader` the lines that matter: those
    :data:`_MATTERS` finds and every line inside a Fabric block, where indentation ends the
    block. A 16,384-node snapshot is ~1.4 GB of ``-q`` text; a GPU's Fabric block is a
    dozen of its ~180 lines."""
    text = _cleaned(text)
    found = {text.rfind("\n", 0, m.start()) + 1 for p in _MATTERS for m in p.finditer(text)}
    reader = _QReader()
    fed, lineno, counted = -1, 1, 0  # fed: where the last line fed ends
    for start in sorted(found):
        if start <= fed:
            continue
        lineno += text.count("\n", counted, start)
        while True:
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            reader.feed(lineno, text[start:end].rstrip().expandtabs(8))
            if reader.block is None or end == len(text):
                break
            start, lineno = end + 1, lineno + 1
        fed = counted = end
    return reader


def _lines(text: str) -> Iterator[str]:
    """The lines of *text* one at a time (a caller that stops early splits no more)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def parse_query_fabric(text: str, products: dict[int, str] | None = None) -> list[GpuFabric]:
    """Read the Fabric section of every GPU from ``nvidia-smi -q`` text or a fragment of it;
    *products*, when given, receives each GPU's ``Product Name`` from the same pass (as
    :func:`parse_product_names` reads them; also when the fabric then turns out unreadable).

    A GPU section without a Fabric block (drivers older than R530) yields a GpuFabric with
    everything None, so the node is reported rather than silently treated as fabric-less.
    Raises ParseError when the text holds neither GPU sections nor any Fabric block.
    """
    reader = _scan(text)
    if products is not None:
        products.update(reader.products)
    if reader.gpus:
        if reader.orphans:
            raise ParseError(
                "Fabric block before the first 'GPU 0000…' header: mixed fragment and full output",
                reader.orphans[0].line,
                SRC_Q,
            )
        return [_to_fabric(i, gpu.fabric, gpu) for i, gpu in enumerate(reader.gpus)]
    blocks = reader.orphans or _headerless_blocks(_clean_lines(text))
    if not blocks:
        raise ParseError(
            "no 'GPU 0000…' section and no Fabric block (State/CliqueId/ClusterUUID) found",
            source=SRC_Q,
        )
    return [_to_fabric(i, block, None) for i, block in enumerate(blocks)]


# --------------------------------------------------------------------------- CSV query


def _csv_header(cells: list[str]) -> tuple[str, ...] | None:
    """The column names if *cells* is a header line (``--format=csv`` without noheader)."""
    names = tuple(re.sub(r"\s*\[.*\]$", "", c).strip() for c in cells)
    known = {f.lower() for f in CSV_FIELDS} | {"uuid", "pci.bus_id", "gpu_uuid"}
    if names and all(n.lower() in known for n in names):
        return names
    return None


_STATE_COLUMNS = frozenset({"fabric.state", "fabric.status"})


def _csv_row(cells: list[str], fields: tuple[str, ...], lineno: int, ordinal: int) -> GpuFabric:
    """One CSV row as a GpuFabric; unknown columns are ignored."""
    row = {name.lower(): cell for name, cell in zip(fields, cells, strict=True)}
    index = ordinal
    if "index" in row:
        raw = row["index"].strip()
        if not _UNSIGNED.match(raw):
            raise ParseError(f"GPU index {raw!r} is not a non-negative integer", lineno, SRC_CSV)
        index = int(raw)
    uuid = row.get("uuid", row.get("gpu_uuid"))
    collected = not _STATE_COLUMNS.isdisjoint(row)
    return GpuFabric(
        index=index,
        bus_id=_value(row.get("pci.bus_id", "")),
        serial=_value(row.get("serial", "")),
        uuid=_value(uuid) if uuid is not None else None,
        state=_value(row.get("fabric.state", "")),
        status=_value(row.get("fabric.status", "")),
        clique_id=_clique(row.get("fabric.cliqueid"), SRC_CSV, lineno),
        cluster_uuid=_cluster_uuid(row.get("fabric.clusteruuid"), SRC_CSV, lineno),
        state_collected=collected,
    )


def _columns(fields: tuple[str, ...] | None, cells: list[str]) -> tuple[str, ...]:
    """The columns of a header-less row: *fields* when given, else the known query whose
    column count matches (the collector's six, NVIDIA topograph's two)."""
    if fields is not None:
        return fields
    return _HEADERLESS.get(len(cells), CSV_FIELDS)


def parse_query_csv(text: str, fields: Iterable[str] | None = None) -> list[GpuFabric]:
    """Read ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader]`` output.

    *fields* is the ``--query-gpu`` list the output was made with; a header line, when
    present, overrides it. Without either, the first row's cell count picks the collector's
    six columns (:data:`CSV_FIELDS`) or NVIDIA topograph's two (:data:`TOPOGRAPH_FIELDS`).
    A line with the wrong number of cells is an error naming the line — that is how
    nvidia-smi's own failure messages ("No devices were found") show up.
    """
    given = tuple(fields) if fields is not None else None
    columns: tuple[str, ...] | None = None
    gpus: list[GpuFabric] = []
    for lineno, line in enumerate(_clean_lines(text), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        header = _csv_header(cells) if not gpus else None
        if header is not None:
            columns = header
            continue
        columns = columns or _columns(given, cells)
        if len(cells) != len(columns):
            raise ParseError(
                f"expected {len(columns)} comma-separated values ({', '.join(columns)}), "
                f"got {len(cells)}: {line.strip()[:80]!r}",
                lineno,
                SRC_CSV,
            )
        gpus.append(_csv_row(cells, columns, lineno, len(gpus)))
    if not gpus:
        raise ParseError("no GPU rows in the CSV query output", source=SRC_CSV)
    return gpus


def parse_fabric_output(text: str, products: dict[int, str] | None = None) -> list[GpuFabric]:
    """Either fabric output, told apart by shape: ``-q`` text has ``key   : value`` lines or a
    ``Fabric``/``GPU 0000…`` line; anything else is read as the CSV query. For snapshots
    and hand-supplied files where the command that produced the text is not recorded.
    *products* as for :func:`parse_query_fabric` (the CSV query has none)."""
    for line in _lines(_cleaned(text)):
        stripped = line.rstrip().expandtabs(8).strip()
        if stripped == "Fabric" or _GPU_HEADER.match(stripped) or " : " in stripped:
            return parse_query_fabric(text, products)
    return parse_query_csv(text)


def parse_product_names(text: str) -> dict[int, str]:
    """The ``Product Name`` of each GPU section of ``nvidia-smi -q`` text, by GPU index (the
    section's position: nvidia-smi lists GPUs in index order). Fragments without ``GPU …``
    headers have none, so the result is empty: the GPU's type is then not known."""
    return _scan(text).products


# --------------------------------------------------------------------------- topo -m

_TRAILING = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|\S+")
_TRAILING_START = frozenset({"CPU", "NUMA", "GPU"})
_GPU_LABEL = re.compile(r"^GPU(\d{1,4})$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d{1,4})\s*:\s*(\S+)\s*$")
_NUMA_RANGE = re.compile(r"(\d{1,5})(?:-(\d{1,5}))?")
_CELL_WORD = re.compile(r"[A-Z]+\d*")


@dataclass(frozen=True, slots=True)
class _Header:
    """Matrix column labels and the names of the affinity columns after them."""

    line: int
    columns: tuple[str, ...]
    trailing: tuple[str, ...]


def _find_header(lines: list[str]) -> _Header:
    """The header line: the first whose first token is ``GPU0`` (prompts before it are
    skipped, so a pasted terminal log still parses)."""
    for lineno, line in enumerate(lines, 1):
        tokens = line.split()
        if not tokens or tokens[0] != "GPU0":
            continue
        cut = next((i for i, t in enumerate(tokens) if t in _TRAILING_START), len(tokens))
        trailing = tuple(_TRAILING.findall(" ".join(tokens[cut:])))
        columns = tuple(tokens[:cut])
        if len(set(columns)) != len(columns):
            raise ParseError("duplicate column label in the matrix header", lineno, SRC_TOPO)
        return _Header(lineno, columns, trailing)
    raise ParseError("no matrix header line starting with 'GPU0' found", source=SRC_TOPO)


def _link_token(raw: str, row: str, col: str, lineno: int) -> str:
    """Validate one matrix cell; SOC (old drivers) is today's SYS."""
    token = "SYS" if raw == "SOC" else raw
    if token == "X" or token in PCIE_RANK or NV_LINK.match(token):
        return token
    raise ParseError(f"unknown link type {raw!r} between {row} and {col}", lineno, SRC_TOPO)


def _numa_list(raw: str | None, lineno: int) -> tuple[int, ...]:
    """``0,2-17`` → (0, 2, …, 17); N/A → ()."""
    value = _value(raw) if raw is not None else None
    if value is None:
        return ()
    nodes: list[int] = []
    for part in value.split(","):
        match = _NUMA_RANGE.fullmatch(part)
        if match is None:
            raise ParseError(f"NUMA affinity {value!r} is not a list of ranges", lineno, SRC_TOPO)
        lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
        if hi < lo:
            raise ParseError(f"NUMA affinity range {part!r} is reversed", lineno, SRC_TOPO)
        nodes.extend(range(lo, hi + 1))
    return tuple(nodes)


def _link_cells(values: list[str]) -> int:
    """How many leading tokens look like matrix cells (upper-case words, ``NV18``); an
    affinity value (``0-71``, ``N/A``) arriving early means the row lost cells."""
    count = 0
    for value in values:
        if not _CELL_WORD.fullmatch(value):
            break
        count += 1
    return count


@dataclass(slots=True)
class _Row:
    """One matrix row: its cells by column label and the affinity values after them."""

    line: int
    cells: dict[str, str]
    extra: dict[str, str]


def _read_rows(lines: list[str], header: _Header) -> dict[str, _Row]:
    """Rows below the header up to the first blank line or ``Legend``."""
    rows: dict[str, _Row] = {}
    ncol = len(header.columns)
    for lineno in range(header.line + 1, len(lines) + 1):
        tokens = lines[lineno - 1].split()
        if not tokens or tokens[0].startswith("Legend"):
            break
        label = tokens[0]
        if label not in header.columns:
            raise ParseError(f"row {label!r} is not a column of the matrix", lineno, SRC_TOPO)
        if label in rows:
            raise ParseError(f"row {label!r} appears twice", lineno, SRC_TOPO)
        values = tokens[1:]
        if _link_cells(values) < ncol:
            raise ParseError(
                f"row {label} has {_link_cells(values)} of {ncol} matrix cells (truncated?)",
                lineno,
                SRC_TOPO,
            )
        extra = values[ncol:]
        if len(extra) > len(header.trailing):
            raise ParseError(f"row {label} has unexpected extra values {extra}", lineno, SRC_TOPO)
        cells = {
            col: _link_token(v, label, col, lineno)
            for col, v in zip(header.columns, values[:ncol], strict=True)
        }
        rows[label] = _Row(lineno, cells, dict(zip(header.trailing, extra, strict=False)))
    missing = [c for c in header.columns if c not in rows]
    if missing:
        raise ParseError(
            f"matrix truncated: no row for {', '.join(missing)}", header.line, SRC_TOPO
        )
    return rows


def _nic_legend(lines: list[str]) -> dict[str, str]:
    """``NIC0: mlx5_0`` lines after ``NIC Legend:``."""
    legend: dict[str, str] = {}
    in_legend = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            in_legend = True
            continue
        match = _NIC_LEGEND.match(line) if in_legend else None
        if match:
            legend.setdefault(match.group(1), match.group(2))
    return legend


def _gpu_index(label: str) -> int | None:
    match = _GPU_LABEL.match(label)
    return int(match.group(1)) if match else None


def _affinity(
    rows: dict[str, _Row], gpus: dict[str, int]
) -> tuple[dict[int, str | None], dict[int, tuple[int, ...]], dict[int, int | None]]:
    """CPU affinity, NUMA affinity and GPU NUMA ID per GPU from the trailing columns."""
    cpu: dict[int, str | None] = {}
    numa: dict[int, tuple[int, ...]] = {}
    gpu_numa: dict[int, int | None] = {}
    for label, index in gpus.items():
        row = rows[label]
        cpu[index] = _value(row.extra.get("CPU Affinity", ""))
        numa[index] = _numa_list(row.extra.get("NUMA Affinity"), row.line)
        raw = _value(row.extra.get("GPU NUMA ID", ""))
        if raw is not None and not _UNSIGNED.match(raw):
            raise ParseError(f"GPU NUMA ID {raw!r} is not a number", row.line, SRC_TOPO)
        gpu_numa[index] = int(raw) if raw is not None else None
    return cpu, numa, gpu_numa


def _pairs(labels: list[str]) -> Iterator[tuple[str, str]]:
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            yield a, b


def _check_cells(rows: dict[str, _Row], gpu_labels: set[str]) -> None:
    """X only on the diagonal, NVLink only between two GPUs: anything else is corrupt."""
    for label, row in rows.items():
        for col, token in row.cells.items():
            if (token == "X") != (col == label):
                raise ParseError(f"misplaced X between {label} and {col}", row.line, SRC_TOPO)
            both_gpus = label in gpu_labels and col in gpu_labels
            if NV_LINK.match(token) and not both_gpus:
                raise ParseError(f"NVLink {token} between {label} and {col}", row.line, SRC_TOPO)


def parse_topo_matrix(text: str) -> GpuTopology:
    """Read ``nvidia-smi topo -m`` / ``topo -mp`` output into a :class:`GpuTopology`.

    Tolerates ANSI escapes (nvidia-smi underlines the header on a terminal), tabs or
    re-spaced columns, trailing blanks, prompt lines before the matrix, and both NIC
    naming styles (``NIC0`` + legend, or ``mlx5_0`` headers from older drivers). A missing
    row, a short row or an unknown cell is a ParseError: half a matrix would give wrong rails.
    """
    lines = _clean_lines(text)
    header = _find_header(lines)
    rows = _read_rows(lines, header)
    gpus = {c: i for c in header.columns if (i := _gpu_index(c)) is not None}
    if len(set(gpus.values())) != len(gpus):
        raise ParseError("duplicate GPU index in the header", header.line, SRC_TOPO)
    legend = _nic_legend(lines)
    nic_labels = [c for c in header.columns if c not in gpus]
    names = {label: legend.get(label, label) for label in nic_labels}
    if len(set(names.values())) != len(names):
        raise ParseError("two NICs share one name in the NIC Legend", header.line, SRC_TOPO)
    _check_cells(rows, set(gpus))
    gpu_labels = sorted(gpus, key=gpus.__getitem__)
    gpu_links = {(gpus[a], gpus[b]): rows[a].cells[b] for a, b in _pairs(gpu_labels)}
    gpu_nic = {(gpus[g], names[n]): rows[g].cells[n] for g in gpu_labels for n in nic_labels}
    nic_links = {(names[a], names[b]): rows[a].cells[b] for a, b in _pairs(nic_labels)}
    cpu, numa, gpu_numa = _affinity(rows, gpus)
    return GpuTopology(
        gpus=tuple(gpus[g] for g in gpu_labels),
        nics=tuple(names[n] for n in nic_labels),
        gpu_links=gpu_links,
        gpu_nic_links=gpu_nic,
        nic_links=nic_links,
        cpu_affinity=cpu,
        numa_affinity=numa,
        gpu_numa_id=gpu_numa,
    )
