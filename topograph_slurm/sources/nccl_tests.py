"""nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``alltoall_perf``) → rows per
message size, the trailer and the header facts. AMD's rccl-tests prints the same table; its
version (``rccl-tests: Version develop:448c4c7``) and RCCL's (``RCCL version : 2.22.3-…``)
come on lines of their own, without ``#``, and are read as nccl-tests' version line is.

Both table layouts are read by their header line, not by position: the older one (``size
count type redop time algbw busbw error`` twice, a float max error) and the current one (a
``root`` column, ``#wrong`` counts). What the header says comes first, so a column nccl-tests
adds later is skipped rather than misread. ``srun --label`` prefixes (``0: ``), CRLF line ends
and log lines interleaved with the table are tolerated; NCCL ``WARN``/``ERROR`` lines,
``Test ... failure`` lines and damaged rows become notes, so nothing read is dropped silently.
"""

from __future__ import annotations

import re

from topograph_slurm.errors import ParseError
from topograph_slurm.model.bench import NcclOutput, SizeRow
from topograph_slurm.model.numbers import decimal, natural

_LABEL = re.compile(r"^\s*\d+:\s?", re.ASCII)
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+).*?nccl-library=(\d+)")
_RCCL_TESTS = re.compile(r"^rccl-tests: Version\s+(\S+)")
_RCCL_LIBRARY = re.compile(r"^RCCL version\s*:\s*(\S+)")
_TEST = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_DEVICE = re.compile(r"^#\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)", re.ASCII)
#: The sizes the run will measure: ``minBytes 8 maxBytes 8589934592 step: 2(factor)``.
_RANGE = re.compile(
    r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)", re.ASCII
)
_NOTE = re.compile(r"NCCL (?:WARN|ERROR)|Test (?:NCCL|CUDA) failure|Test failure|NCCL error")


def parse_nccl_tests(text: str, source: str = "nccl-tests output") -> NcclOutput:
    """The rows, trailer, header facts and notes of one run's output. A ParseError when there
    is no result table at all (the run printed only errors: those are in the message)."""
    out = NcclOutput([])
    header: list[str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _LABEL.sub("", raw.rstrip("\r"), count=1) if _LABEL.match(raw) else raw.rstrip("\r")
        if line.startswith("#"):
            header = _header(line) or header
            _comment(line, out)
        elif match := _RCCL_TESTS.match(line):
            out.version = match.group(1)
        elif match := _RCCL_LIBRARY.match(line):
            out.nccl_library = match.group(1)
        elif _NOTE.search(line):
            out.notes.append(line.strip())
        elif header is not None and line.strip() and natural(line.split()[0]) is not None:
            _row(line, header, number, out)
    if not out.rows:
        detail = f": {out.notes[-1]}" if out.notes else ""
        raise ParseError(f"no nccl-tests result table{detail}", source=source)
    for row in out.rows:
        if row.wrong or row.in_wrong:
            out.notes.append(f"{row.size} B: {row.wrong or 0}/{row.in_wrong or 0} wrong elements")
    return out


def _header(line: str) -> list[str] | None:
    """The column names of a table header line (``#  size  count  type ...``), else None."""
    words = line.lstrip("#").split()
    if words[:2] == ["size", "count"] and "busbw" in words:
        return words
    return None


def _comment(line: str, out: NcclOutput) -> None:
    """Header facts and trailer values from one ``#`` line."""
    if match := _VERSION.match(line):
        out.version, out.nccl_library = match.group(1), match.group(2)
    elif match := _TEST.match(line):
        out.test = match.group(1)
    elif match := _DEVICE.match(line):
        if match.group(1) not in out.hosts:
            out.hosts.append(match.group(1))
    elif match := _AVG.match(line):
        out.avg_busbw = decimal(match.group(1))
    elif match := _BOUNDS.match(line):
        out.out_of_bounds = natural(match.group(1))
    elif match := _RANGE.search(line):
        out.last_size = _last_size(*match.groups())


def _row(line: str, header: list[str], number: int, out: NcclOutput) -> None:
    """One size's row, by the header's column names; a row that does not fit is a note."""
    words = line.split()
    if len(words) != len(header):
        out.notes.append(f"line {number}: unreadable row {line.strip()!r}")
        return
    try:
        out.rows.append(_size_row(dict(_columns(header, words))))
    except ValueError:
        out.notes.append(f"line {number}: unreadable row {line.strip()!r}")


def _columns(header: list[str], words: list[str]) -> list[tuple[str, str]]:
    """(name, value) with the second half's names prefixed ``in_`` (the in-place columns)."""
    seen: set[str] = set()
    named = []
    for name, value in zip(header, words, strict=True):
        key = name.lstrip("#")
        named.append((f"in_{key}" if key in seen else key, value))
        seen.add(key)
    return named


def _last_size(first: str, last: str, step: str, kind: str) -> int | None:
    """The largest size nccl-tests measures from *first* up to *last*, each size *step* times
    the one before (``factor``) or *step* bytes more: its loop stops at the last one within
    *last*. None when the header's numbers make no sense."""
    low, high, by = natural(first), natural(last), natural(step)
    if low is None or high is None or by is None or not 1 <= low <= high:
        return None
    if kind == "bytes":
        return low + (high - low) // by * by if by else low
    size = low
    while by > 1 and size * by <= high:
        size *= by
    return size


def _size_row(cols: dict[str, str]) -> SizeRow:
    return SizeRow(
        size=_whole(cols["size"]),
        count=_whole(cols["count"]),
        dtype=cols.get("type", ""),
        redop=cols.get("redop", ""),
        time_us=_float(cols.get("time")),
        algbw=_float(cols.get("algbw")),
        busbw=_float(cols.get("busbw")),
        in_time_us=_float(cols.get("in_time")),
        in_algbw=_float(cols.get("in_algbw")),
        in_busbw=_float(cols.get("in_busbw")),
        wrong=_int(cols.get("wrong")),
        in_wrong=_int(cols.get("in_wrong")),
        error=_float(cols.get("error")),
        in_error=_float(cols.get("in_error")),
    )


def _float(value: str | None) -> float | None:
    """A number, or None for an absent column or ``N/A`` (in-place of a test without it); a
    ValueError (the row is unreadable) for anything but a finite ASCII decimal: ``nan``,
    ``inf`` or ``1e309`` is no measurement."""
    if value is None or value == "N/A":
        return None
    number = decimal(value)
    if number is None:
        raise ValueError(f"not a number: {value!r}")
    return number


def _int(value: str | None) -> int | None:
    """A count, as :func:`_float`; ASCII digits only (``int`` reads ``٧`` and ``1_0``)."""
    if value is None or value == "N/A":
        return None
    return _whole(value)


def _whole(value: str) -> int:
    number = natural(value)
    if number is None:
        raise ValueError(f"not a count: {value!r}")
    return number
