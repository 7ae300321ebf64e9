"""Per-expert load statistics, ``[layer][logical expert]`` token counts, as the EPLB
recorders keep them, written out as one of:

- SGLang's expert-distribution dump as JSON: an object whose ``logical_count`` holds the
  table, or one table per recorded forward pass (``[pass][layer][expert]``, what its
  ``_StatAccumulator.dump`` saves; the passes are summed). The file its recorder writes is a
  ``torch.save`` pickle, which is not read here: a pickle runs code, and torch is no
  dependency (docs/moe.md shows the one-line conversion).
- DeepSeek EPLB's ``weight``: a list of lists (one per layer), or an object whose ``weight``
  (or ``load``) key holds that list;
- CSV: one row per layer, counts separated by commas; blank lines and lines starting with
  ``#`` are skipped, and a first row with no number in it is a header.

A count is a whole number of tokens: a non-negative integer (``12.0`` is taken as 12, so a
tensor's ``tolist()`` of floats reads). Every row has as many experts as the first.
"""

from __future__ import annotations

import csv
import json
import math
from typing import Any

from topograph_slurm.errors import InputError, ParseError
from topograph_slurm.model.numbers import decimal, natural

#: ``--loads-format``: ``auto`` tells the others apart by the file's first character and keys.
LOAD_FORMATS = ("auto", "sglang", "eplb", "csv")
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
