"""Whole-column work on decoded UFM records, shared by the devices (:mod:`.translate`) and the
cables (:mod:`.cables`).

A 16,384-node answer holds ~800k ports and ~400k links: Python code per record costs several
times the decoding, so records are read a field at a time (``map``, ``zip``, ``dict`` over
whole columns) and every conversion runs once per distinct value (benchmarks/PERFORMANCE.md,
"UFM path").
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from topograph_slurm.errors import ParseError
from topograph_slurm.model.fabric import normalize_guid
from topograph_slurm.model.numbers import natural
from topograph_slurm.sources.ufm import schema
from topograph_slurm.sources.ufm.schema import JsonText, decode_list

T = TypeVar("T")

#: The characters of newline-joined GUIDs in normal form.
_HEX_DIGITS = b"0123456789abcdef\n"
#: Each hex digit's value, by its ASCII code.
_DIGIT_VALUES = np.zeros(256, dtype=np.uint8)
_DIGIT_VALUES[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16)


def decode(text: JsonText, source: str, key: str, item: type[T]) -> list[T]:
    """Endpoint *key* of the answers from *source* as a list of *item* records."""
    return decode_list(text, f"{source}/{key}", item)


def column(records: Sequence[object], name: str) -> list[Any]:
    return list(map(operator.attrgetter(name), records))


def by_value(values: list[Any], convert: Callable[[Any], Any]) -> list[Any]:
    """``convert`` of every value, called once per distinct value (rates, widths and LIDs
    repeat across ports)."""
    table = {value: convert(value) for value in set(values)}
    return list(map(table.__getitem__, values))


def run_starts(*columns: NDArray[Any]) -> NDArray[np.intp]:
    """Where each run of equal rows begins in *columns* sorted together: the first row of
    each GUID in (guid, port) order, the first record of each cable in cable order."""
    if not len(columns[0]):
        return np.empty(0, dtype=np.intp)
    change = np.zeros(len(columns[0]) - 1, dtype=bool)
    for values in columns:
        change |= values[1:] != values[:-1]
    return np.flatnonzero(np.concatenate(([True], change)))


def normal(
    cache: dict[str, str] | None,
    texts: list[str | None],
    where: str,
    name: str,
    optional: bool = False,
) -> list[str]:
    """GUID texts in normal form, each GUID one string object (*cache*: text → normal form);
    a missing one (``None``, empty) stays None where *optional*, else is an error. *where* is
    formatted with the bad row. Without a *cache* (columns that only need equal strings, not
    the same objects) a column already in normal form is returned as it is. Each distinct text
    is checked once (GUIDs repeat: a switch's on each of its ports)."""
    interned, distinct = {} if cache is None else cache, set(texts)
    new = cast(set[str], distinct.difference(interned, (None, "")))
    missing = not optional and (None in distinct or "" in distinct)
    if _canonical(list(new)):  # each distinct GUID once; all in UFM's own form, usually
        if cache is None and not missing:
            return cast(list[str], texts)
        interned.update(zip(new, new, strict=True))
        new = set()
    if missing:
        new.add(next(text for text in texts if not text) or "")
    for text in new:
        try:
            guid = normalize_guid(text)
        except ValueError:
            row = texts.index(text)
            raise ParseError(
                f"field {name!r}: bad GUID {text!r}", None, where.format(row=row)
            ) from None
        interned[text] = interned.setdefault(guid, guid)
    return list(map(interned.get, texts))  # type: ignore[arg-type]


def _canonical(texts: Sequence[str]) -> bool:
    """Whether every text is a GUID in normal form, 16 lowercase hex digits: joined, the
    separators must fall every 17th byte and be the only ones, and deleting the hex digits
    must leave nothing; no Python code per text."""
    joined, separators = "\n".join(texts).encode(), max(len(texts) - 1, 0)
    return (
        len(joined) == 17 * separators + 16 * bool(texts)
        and joined.count(b"\n") == separators
        and joined[16::17] == b"\n" * separators
        and not joined.translate(None, _HEX_DIGITS)
    )


def guid_numbers(guids: Sequence[str]) -> NDArray[np.uint64]:
    """GUIDs in normal form (16 lowercase hex digits, as :func:`normal` gives them) as 64-bit
    numbers, which sort as their texts do: for whole-column sorting and searching in numpy
    rather than Python per GUID."""
    digits = _DIGIT_VALUES[np.frombuffer("".join(guids).encode("ascii"), dtype=np.uint8)]
    pairs = digits.reshape(len(guids), 16)
    octets = (pairs[:, 0::2] << 4) | pairs[:, 1::2]
    return octets.view(">u8").reshape(len(guids)).astype(np.uint64)


def port_ids(
    records: Sequence[schema.PortId], text: JsonText, source: str, cache: dict[str, str] | None
) -> tuple[list[str], list[int]]:
    """Every port record's node GUID (normal form; *cache* as for :func:`normal`) and port
    number. A port without either takes them from its name (``<guid>_<port>``), decoded from
    the answer *text* only then."""
    where = f"{source}/ports[{{row}}]"
    texts, numbers = column(records, "guid"), column(records, "number")
    if not all(texts) or not set(map(type, numbers)) <= {int}:
        _port_identities(decode(text, source, "ports", schema.PortPeer), texts, numbers, where)
    return normal(cache, texts, where, "guid"), numbers


def _port_identities(
    peers: list[schema.PortPeer], texts: list[str | None], numbers: list[Any], where: str
) -> None:
    """Fill in the GUID text and port number of ports that lack one, from their name
    (``<guid>_<port>``); a port number given as text becomes a number."""
    for row, port in enumerate(peers):
        if texts[row] and type(numbers[row]) is int:
            continue
        name = port.name or ""
        texts[row] = texts[row] or name.rpartition("_")[0]
        if not texts[row]:
            raise ParseError(
                "missing field 'guid' (not a UFM response?)", None, where.format(row=row)
            )
        given = numbers[row]
        number = given if given is not None else name.rpartition("_")[2]
        if given is None and ("_" not in name or not number):
            raise ParseError(
                "missing field 'number' (not a UFM response?)", None, where.format(row=row)
            )
        value = number if type(number) is int else natural(str(number))
        if value is None or value > 255:
            where = where.format(row=row)
            raise ParseError(f"field 'number': bad port number {shown(number)}", None, where)
        numbers[row] = value


def ints(values: list[int | str], where: str, name: str) -> list[int]:
    """Port numbers as numbers: the schema lets ``"1"`` through (real UFM sends link ports as
    text), checked here as digits of at most 255 once per distinct text."""
    if set(map(type, values)) <= {int}:
        return values  # type: ignore[return-value]
    table = {value: _port_number(value) for value in set(values)}
    if None in table.values():
        bad = next(value for value, number in table.items() if number is None)
        where = where.format(row=values.index(bad))
        raise ParseError(f"field {name!r}: bad port number {shown(bad)}", None, where)
    return list(map(table.__getitem__, values))  # type: ignore[arg-type]


def shown(value: object) -> str:
    """A bad value for a message: quoted, at most 40 characters of it."""
    text = repr(value)
    return text if len(text) <= 40 else text[:36] + "...'"


def _port_number(value: int | str) -> int | None:
    number = value if isinstance(value, int) else natural(value)
    return number if number is not None and number <= 255 else None
