"""Per-expert load statistics, ``[layer][logical expert]`` token counts, as the EPLB
recorders keep them, written out as one of:

- SGLang's expert-distribution dump as JSON: an object whose ``logical_count`` holds the
  table, or one table per recorded forward pass (``[pass][layer][expert]``, what its
  ``_StatAccumulator.dump`` saves; the passes are summed). The file its recorder writes is a
  ``torch.save`` pickle, which is not read here: a pickle runs code, and torch is no
  dependency (docs/moe.md shows the one-line conversion).
- DeepSeek EPLB's ``weight``: a list of lists (one per layer), or an object whose ``weight``
  (or ``load``) key holds that list;
- TensorRT-LLM's expert statistics directory (parse_trtllm_statistics);
- CSV: one row per layer, counts separated by commas; blank lines and lines starting with
  ``#`` are skipped, and a first row with no number in it is a header.

A count is a whole number of tokens: a non-negative integer (``12.0`` is taken as 12, so a
tensor's ``tolist()`` of floats reads). Every row has as many experts as the first.
"""

from __future__ import annotations

import csv
import json
import math
import struct
from typing import Any

from topograph_slurm.errors import InputError, ParseError
from topograph_slurm.model.numbers import decimal, natural

#: ``--loads-format``: ``auto`` tells the others apart by the file's first character and keys.
LOAD_FORMATS = ("auto", "sglang", "eplb", "csv", "trtllm")
#: The object keys a JSON load file may hold its table under, per format.
JSON_KEYS = {
    "auto": ("logical_count", "weight", "load"),
    "sglang": ("logical_count",),
    "eplb": ("weight", "load"),
}
#: The largest count read: a 64-bit counter's (float32, EPLB's arithmetic, holds it).
MAX_COUNT = 2**63 - 1


def parse_load(text: str, source: str, fmt: str = "auto") -> list[list[int]]:
    """The table in *text* read as *fmt* (``auto``: JSON when it starts with ``[`` or ``{``,
    else CSV), checked."""
    stripped = text.lstrip()
    as_json = fmt in ("sglang", "eplb") or (fmt == "auto" and stripped[:1] in ("[", "{"))
    rows = _json_rows(stripped, source, fmt) if as_json else _csv_rows(text, source)
    if not rows or not rows[0]:
        raise InputError(f"{source}: no expert loads (want one row of token counts per layer)")
    width = len(rows[0])
    for layer, row in enumerate(rows):
        if len(row) != width:
            raise InputError(f"{source}: layer {layer} has {len(row)} experts, layer 0 has {width}")
    return rows


def _json_rows(text: str, source: str, fmt: str) -> list[list[int]]:
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError) as err:  # JSONDecodeError, an int of 4,300+ digits
        raise InputError(f"{source}: not JSON: {err}") from None
    keys = JSON_KEYS[fmt]
    if isinstance(data, dict):
        key = next((k for k in keys if k in data), None)
        if key is None:
            raise InputError(f"{source}: a JSON object needs a {' or '.join(map(repr, keys))} key")
        data = data[key]
    elif fmt == "sglang":
        raise InputError(f"{source}: an SGLang dump is an object with a 'logical_count' key")
    if fmt != "eplb" and _is_slabs(data):
        return _summed([_table(slab, source) for slab in data], source)
    return _table(data, source)


def _is_slabs(data: Any) -> bool:
    """Whether *data* is SGLang's ``[pass][layer][expert]``: its first row's first cell a list."""
    return bool(
        isinstance(data, list) and data and isinstance(data[0], list) and data[0]
    ) and isinstance(data[0][0], list)


def _table(data: Any, source: str) -> list[list[int]]:
    if not isinstance(data, list) or not all(isinstance(row, list) for row in data):
        raise InputError(f"{source}: want a list of layers, each a list of token counts")
    return [
        [_count(v, source, layer, e) for e, v in enumerate(row)] for layer, row in enumerate(data)
    ]


def _summed(slabs: list[list[list[int]]], source: str) -> list[list[int]]:
    """The per-pass tables of an SGLang dump added up, once they all have the first's shape."""
    shape = [len(row) for row in slabs[0]]
    for number, slab in enumerate(slabs):
        if [len(row) for row in slab] != shape:
            raise InputError(
                f"{source}: forward pass {number} has another [layer][expert] shape than pass 0"
            )
    return [
        [_count(sum(cells), source, layer, e) for e, cells in enumerate(zip(*rows, strict=True))]
        for layer, rows in enumerate(zip(*slabs, strict=True))
    ]


def _count(value: Any, source: str, layer: int, expert: int) -> int:
    """One token count: a non-negative whole number, else an error naming where it is."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value, whole = int(value), True
    if not whole or not 0 <= value <= MAX_COUNT:
        raise InputError(
            f"{source}: layer {layer} expert {expert}: {value!r} is not a token count "
            "(a whole number from 0 to 2**63-1)"
        )
    return int(value)


def _csv_rows(text: str, source: str) -> list[list[int]]:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    rows = list(csv.reader(lines))
    if rows and not any(_number(cell) is not None for cell in rows[0]):
        rows = rows[1:]
    table = []
    for layer, row in enumerate(rows):
        counts = []
        for expert, cell in enumerate(row):
            value = _number(cell)
            if value is None:
                raise ParseError(
                    f"layer {layer} expert {expert}: {cell.strip()!r} is not a token count",
                    source=source,
                )
            counts.append(_count(value, source, layer, expert))
        table.append(counts)
    return table


def _number(cell: str) -> int | float | None:
    """A cell's number: digits only as an integer, else a finite plain decimal, else None."""
    whole = natural(cell)
    return whole if whole is not None else decimal(cell)


#: safetensors dtypes a TensorRT-LLM count can be in (its ``torch.bincount`` gives int64).
_COUNT_DTYPES = {"I64": "q", "I32": "i", "U8": "B"}
#: The largest safetensors header read (TensorRT-LLM's: one entry per iteration and layer).
MAX_HEADER = 64 * 2**20


def parse_trtllm_statistics(
    meta_text: str, ranks: dict[str, bytes], source: str
) -> list[list[int]]:
    """TensorRT-LLM's expert statistics (``EXPERT_STATISTIC_PATH``, written by
    tensorrt_llm/_torch/expert_statistic.py): *meta_text* its ``meta_info.json``
    (``num_experts``), *ranks* each ``rank<N>.safetensors`` by name, whose tensors, keyed
    ``<iteration>_<layer>``, are one count per expert. The table sums every rank and iteration
    per layer, layers in index order (the first is ``experts --first-layer``)."""
    try:
        meta: Any = json.loads(meta_text)
    except (ValueError, RecursionError) as err:
        raise InputError(f"{source}/meta_info.json: not JSON: {err}") from None
    experts = meta.get("num_experts") if isinstance(meta, dict) else None
    if not isinstance(experts, int) or isinstance(experts, bool) or experts < 1:
        raise InputError(f"{source}/meta_info.json: want a positive 'num_experts'")
    if not ranks:
        raise InputError(f"{source}: no rank*.safetensors statistics")
    layers: dict[int, list[int]] = {}
    for name in sorted(ranks):
        for key, counts in _safetensors_counts(ranks[name], f"{source}/{name}", experts):
            layer = _layer_of(key, f"{source}/{name}")
            total = layers.setdefault(layer, [0] * experts)
            layers[layer] = [
                a + _count(b, f"{source}/{name} {key}", layer, e)
                for e, (a, b) in enumerate(zip(total, counts, strict=True))
            ]
    return [
        [_count(v, source, i, e) for e, v in enumerate(layers[layer])]
        for i, layer in enumerate(sorted(layers))
    ]


def _layer_of(key: str, source: str) -> int:
    parts = key.split("_")
    if len(parts) != 2 or not all(part.isdigit() and part.isascii() for part in parts):
        raise InputError(f"{source}: tensor {key!r} is not named <iteration>_<layer>")
    return int(parts[1])


def _safetensors_counts(data: bytes, source: str, experts: int) -> list[tuple[str, list[int]]]:
    """Each tensor of one safetensors file (8-byte little-endian header length, a JSON header
    of ``dtype``, ``shape``, ``data_offsets`` into the bytes after it) as a list of counts."""
    size = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    if not 2 <= size <= min(MAX_HEADER, len(data) - 8):
        raise InputError(f"{source}: not a safetensors file (header length {size})")
    try:
        header: Any = json.loads(data[8 : 8 + size])
    except (ValueError, RecursionError) as err:
        raise InputError(f"{source}: safetensors header is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise InputError(f"{source}: safetensors header is not an object")
    body = memoryview(data)[8 + size :]
    tensors = []
    for key, info in sorted(header.items()):
        if key == "__metadata__":
            continue
        code = _COUNT_DTYPES.get(str(info.get("dtype"))) if isinstance(info, dict) else None
        if code is None or info.get("shape") != [experts]:
            raise InputError(
                f"{source}: tensor {key!r} is not {experts} integer counts (dtype "
                f"{'/'.join(_COUNT_DTYPES)}, shape [{experts}])"
            )
        start, end = _offsets(info.get("data_offsets"), len(body), source, key)
        width = struct.calcsize(code)
        if end - start != experts * width:
            raise InputError(
                f"{source}: tensor {key!r} holds {end - start} bytes, not {experts * width}"
            )
        tensors.append((key, list(struct.unpack_from(f"<{experts}{code}", body, start))))
    return tensors


def _offsets(value: Any, length: int, source: str, key: str) -> tuple[int, int]:
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] <= value[1] <= length
    )
    if not ok:
        raise InputError(f"{source}: tensor {key!r} has data_offsets {value!r} outside the file")
    return value[0], value[1]
