"""Per-expert load statistics, ``[layer][logical expert]`` token counts, as the EPLB
recorders keep them (DeepSeek's EPLB ``weight``, vLLM's and SGLang's EPLB, TensorRT-LLM's
offline load balancer), written out as one of:

- JSON: a list of lists (one per layer), or an object whose ``weight`` or ``load`` key holds
  that list;
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

#: The object keys a JSON load file may hold its table under.
JSON_KEYS = ("weight", "load")
#: The largest count read: a 64-bit counter's (float32, EPLB's arithmetic, holds it).
MAX_COUNT = 2**63 - 1


def parse_load(text: str, source: str) -> list[list[int]]:
    """The table in *text* (JSON when it starts with ``[`` or ``{``, else CSV), checked."""
    stripped = text.lstrip()
    rows = _json_rows(stripped, source) if stripped[:1] in ("[", "{") else _csv_rows(text, source)
    if not rows or not rows[0]:
        raise InputError(f"{source}: no expert loads (want one row of token counts per layer)")
    width = len(rows[0])
    for layer, row in enumerate(rows):
        if len(row) != width:
            raise InputError(f"{source}: layer {layer} has {len(row)} experts, layer 0 has {width}")
    return rows


def _json_rows(text: str, source: str) -> list[list[int]]:
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError) as err:  # JSONDecodeError, an int of 4,300+ digits
        raise InputError(f"{source}: not JSON: {err}") from None
    if isinstance(data, dict):
        key = next((k for k in JSON_KEYS if k in data), None)
        if key is None:
            raise InputError(f"{source}: a JSON object needs a 'weight' or 'load' key")
        data = data[key]
    if not isinstance(data, list) or not all(isinstance(row, list) for row in data):
        raise InputError(f"{source}: want a list of layers, each a list of token counts")
    return [
        [_count(v, source, layer, e) for e, v in enumerate(row)] for layer, row in enumerate(data)
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
