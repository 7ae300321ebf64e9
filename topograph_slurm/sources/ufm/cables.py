"""UFM's cables: every link once, its ends in canonical order, at the slower rate of the two
ports at its ends (UFM's links carry a width but no speed).

The cables need the links answer and the ports' identities and rates, never the devices, so
for a large answer a forked child works them out (:func:`in_background`): it reads the links
while the parent decodes the ports, then takes the ports' identities and, later, their rates
from the parent (:class:`PortIds`, :class:`PortRates`: so the ports are decoded once) and
matches the links' ends to them while the parent builds the devices. The cables come back as
port record rows (:class:`Cables`), which the parent turns into its own GUID strings. On two
cores each side has about half of the work (benchmarks/PERFORMANCE.md, "UFM path").
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from topograph_slurm.errors import ParseError
from topograph_slurm.model import rates as rates_
from topograph_slurm.model.fabric import Links
from topograph_slurm.sources.ibnetdiscover import fork
from topograph_slurm.sources.ufm import schema
from topograph_slurm.sources.ufm.columns import (
    column,
    decode,
    guid_numbers,
    ints,
    normal,
    run_starts,
)
from topograph_slurm.sources.ufm.responses import UfmResponses
from topograph_slurm.sources.ufm.schema import JsonText

# Per-lane signalling rates (Gb/s) some UFM versions print instead of names.
_LANE_RATES = {
    2.5: "SDR",
    5.0: "DDR",
    10.0: "QDR",
    10.3125: "FDR10",
    14.0: "FDR",
    14.0625: "FDR",
    25.0: "EDR",
    25.78125: "EDR",
    50.0: "HDR",
    53.125: "HDR",
    100.0: "NDR",
    106.25: "NDR",
    200.0: "XDR",
    212.5: "XDR",
}
_UNKNOWN = {"", "n/a", "na", "unknown", "none", "?", "???", "-"}
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(g|gb|gbps|gb/s)?\s*$", re.IGNORECASE)

#: A port's rate as ibnetdiscover prints it, (width, speed): ``("4x", "HDR")``.
Rate = tuple[str, str]
#: (guid, port, guid, port) of a cable, its ends in canonical order.
CableKey = tuple[str, int, str, int]


def ufm_speed(text: object, width: str = "") -> str:
    """UFM's ``active_speed`` as ibnetdiscover names it: ``HDR`` stays; a number is read as
    the port rate first (``200 Gb/s`` at *width* ``4x`` is HDR, as ibstat prints rates), else
    as a lane rate (``53.125 Gbps`` is HDR); unknown is ``???``."""
    raw = str(text if text is not None else "").strip()
    if raw.lower() in _UNKNOWN:
        return "???"
    upper = raw.upper()
    if upper in rates_.KNOWN_SPEEDS:
        return upper
    m = _RATE_RE.match(raw)
    if m:
        rate, lanes = float(m.group(1)), rates_.lanes(width)
        if lanes and rate / lanes in _LANE_RATES:  # a port rate, as ibstat prints it
            return _LANE_RATES[rate / lanes]
        if rate in _LANE_RATES:
            return _LANE_RATES[rate]
    return upper


def ufm_width(text: object) -> str:
    """``4x`` / ``4X`` / ``x4`` / ``4`` → ``4x``; unknown → ``???`` (as ibnetdiscover prints)."""
    raw = str(text if text is not None else "").strip().lower()
    digits = raw.strip("x")
    return f"{int(digits)}x" if rates_.LANE_COUNT.fullmatch(digits) else "???"


@dataclass(slots=True)
class LinkColumns:
    """Every link record's ends (GUIDs in normal form, port numbers) and width, a column each,
    in answer order."""

    a: list[str]
    a_port: list[int]
    b: list[str]
    b_port: list[int]
    widths: list[str]


@dataclass(slots=True)
class Mismatches:
    """Cables whose two ports report different rates: how many, and the first (in cable
    order), for one summary note."""

    count: int = 0
    first: str = ""


#: A column of rows (of port records, or past them of :attr:`Cables.unlisted` ends) or of
#: indexes into a table of distinct values: ``array("I")``.
Rows: TypeAlias = "array[int]"
#: A column of GUIDs (:func:`.columns.guid_numbers`) or port numbers, as numbers.
Numbers: TypeAlias = NDArray[np.uint64]
#: A column of rows, -1 for none.
Indexes: TypeAlias = NDArray[np.intp]


@dataclass(slots=True)
class PortRates:
    """Each port record's rate, as an index into the distinct rates UFM sends."""

    table: list[Rate]
    index: Rows

    def all(self) -> list[Rate]:
        """Each port record's rate (every port of one rate shares one tuple)."""
        return list(map(self.table.__getitem__, self.index))


def port_rates(ports: Sequence[schema.PortRate | schema.NamedPortRate]) -> PortRates:
    """Each port's (width, speed) as ibnetdiscover names them, in answer order, worked out
    once per distinct pair UFM sends (a speed given as a number may be a port rate, which
    needs the width). Pairs that name one rate differently (``4x``, ``4X``) share its
    entry: the table holds each rate once."""
    pairs = list(zip(column(ports, "active_width"), column(ports, "active_speed"), strict=True))
    named = {pair: _rate(*pair) for pair in set(pairs)}
    table = sorted(set(named.values()))
    entry = {rate: i for i, rate in enumerate(table)}
    index = {pair: entry[rate] for pair, rate in named.items()}
    return PortRates(table, array("I", map(index.__getitem__, pairs)))


def _rate(width: object, speed: object) -> Rate:
    named = ufm_width(width)
    return named, ufm_speed(speed, named)


@dataclass(slots=True)
class Cables:
    """The cables, every column a flat array so that they travel back from a forked child as
    a few byte strings.

    Cable *i* runs from end row ``a[i]`` to ``b[i]``, the smaller end first, cables in (guid,
    port) order of their ends, at ``rates.table[rate[i]]``. An end row below the number of
    port records is that record (whose GUID and number the devices side holds already, so no
    GUID text travels); past them it is one of the ``unlisted`` ends, (guid, port) of a link
    end that no port record names. ``rates`` also holds each port record's rate, and
    ``linked[r]`` is 0 for a port record *r* that no link names (a record that a later one of
    the same port repeats counts as linked, so each port counts once)."""

    a: Rows
    b: Rows
    rate: Rows
    rates: PortRates
    linked: bytearray
    unlisted: list[tuple[str, int]] = field(default_factory=list)
    mismatches: Mismatches = field(default_factory=Mismatches)

    def links(
        self, guids: list[str], numbers: list[int], intern: Callable[[str, str], str]
    ) -> Links:
        """The cables as :class:`Links`, each end the very GUID string of *guids* (each port
        record's, as the devices side keyed it) or, for an unlisted end, ``intern(guid,
        guid)``."""
        if self.unlisted:
            guids = guids + [intern(guid, guid) for guid, _ in self.unlisted]
            numbers = numbers + [port for _, port in self.unlisted]
        texts, ports = np.array(guids, dtype=object), np.array(numbers, dtype=object)
        table = self.rates.table
        widths, speeds = (np.array([rate[i] for rate in table], dtype=object) for i in (0, 1))
        a, b, rate = (np.frombuffer(rows, dtype=np.uint32) for rows in (self.a, self.b, self.rate))
        return Links(
            texts[a].tolist(),
            ports[a].tolist(),
            texts[b].tolist(),
            ports[b].tolist(),
            widths[rate].tolist(),
            speeds[rate].tolist(),
        )


def _columns_of(pairs: list[Rate]) -> tuple[list[str], list[str]]:
    if not pairs:
        return [], []
    width, speed = map(list, zip(*pairs, strict=True))
    return width, speed


#: Answers from this size on (ports and links together: 8 MB, ~15k ports) are read partly by
#: a forked child (benchmarks/PERFORMANCE.md, "UFM path"); below, the fork costs more than
#: it saves.
_FORK_AT = 1 << 23


@dataclass(slots=True)
class PortIds:
    """Each port record's node GUID and port number: what the cables need from the ports,
    handed to the forked child once the devices side has read them (GUIDs travel
    newline-joined, port numbers as bytes)."""

    guids: list[str]
    numbers: list[int]

    def __getstate__(self) -> tuple[str, bytes]:
        return "\n".join(self.guids), bytes(self.numbers)

    def __setstate__(self, state: tuple[str, bytes]) -> None:
        guids, numbers = state
        self.guids, self.numbers = guids.split("\n") if guids else [], list(numbers)


def in_background(
    responses: UfmResponses, source: str, ids: fork.Feed[PortIds]
) -> fork.Pending[Cables]:
    """The cables of large answers in a forked child, which reads the links and the ports'
    rates while this process reads the ports' devices, then takes the ports' identities from
    the parent (*ids*, put by the caller). When no CPU is free, and whenever the child
    fails, they are computed here when asked for: a bad link or rate raises its ParseError
    from here, after any error the devices side found in the ports."""
    compute = partial(read_cables, responses.links, responses.ports, source, ids.get)
    big = len(responses.ports) + len(responses.links) >= _FORK_AT
    return fork.in_background(compute, ids) if big else fork.Pending(compute)


def read_cables(
    links: JsonText, ports: JsonText, source: str, ids: Callable[[], PortIds]
) -> Cables:
    """The cables of a links answer (:class:`Cables`) between the ports *ids* gives (asked
    for only once needed: in a forked child the parent works them out meanwhile), at the
    rates the *ports* answer gives (decoded here, while the child would wait). GUIDs only
    need to be equal here, not the devices side's objects, so none is interned."""
    columns = link_columns(links, source, None)
    rates = port_rates(_rate_records(ports, source))
    return _cables(columns, _PortIndex.of(ids()), rates)


def _rate_records(ports: JsonText, source: str) -> Sequence[schema.PortRate | schema.NamedPortRate]:
    """The ports' rate fields: as named rates when every port's are (the usual answer),
    else as whatever UFM sent (or the error a bad answer is)."""
    try:
        return decode(ports, source, "ports", schema.NamedPortRate)
    except ParseError:
        return decode(ports, source, "ports", schema.PortRate)


def link_columns(text: JsonText, source: str, guids: dict[str, str] | None) -> LinkColumns:
    """The links answer decoded and its columns checked: GUIDs (through *guids* as for
    :func:`.columns.normal`), port numbers, widths."""
    links = decode(text, source, "links", schema.Link)
    where = f"{source}/links[{{row}}]"
    return LinkColumns(
        normal(guids, column(links, "source_guid"), where, "source_guid"),
        ints(column(links, "source_port"), where, "source_port"),
        normal(guids, column(links, "destination_guid"), where, "destination_guid"),
        ints(column(links, "destination_port"), where, "destination_port"),
        column(links, "width"),
    )


@dataclass(frozen=True, slots=True)
class _PortIndex:
    """The port records' (guid, port) as sorted numbers, so that the link ends find their
    records by one vectorised binary search; of records that repeat a port, the last is the
    port's (as a dict of them would keep)."""

    records: int
    guids: Numbers  # the distinct GUIDs, sorted
    keys: Numbers  # each record's GUID index << 8 | port, sorted stably
    rows: Indexes  # the record of each of *keys*

    @classmethod
    def of(cls, port: PortIds) -> _PortIndex:
        guids, at = np.unique(guid_numbers(port.guids), return_inverse=True)
        keys = at.astype(np.uint64) << np.uint64(8) | np.asarray(port.numbers, dtype=np.uint64)
        rows = np.argsort(keys, kind="stable")
        return cls(len(port.guids), guids, keys[rows], rows)

    def find(self, guids: Numbers, ports: Numbers) -> Indexes:
        """The record of each (guid, port) link end; -1 where no record names it."""
        if not self.records:
            return np.full(len(guids), -1, dtype=np.intp)
        at = np.minimum(np.searchsorted(self.guids, guids), len(self.guids) - 1)
        key = at.astype(np.uint64) << np.uint64(8) | ports
        pos = np.searchsorted(self.keys, key, side="right") - 1
        hit = (self.guids[at] == guids) & (pos >= 0) & (self.keys[pos] == key)
        rows: Indexes = np.where(hit, self.rows[pos], -1)
        return rows

    def repeated(self) -> Indexes:
        """The records that a later record of the same port repeats."""
        rows: Indexes = self.rows[:-1][self.keys[:-1] == self.keys[1:]]
        return rows


@dataclass(frozen=True, slots=True)
class _Ends:
    """One side of every link record as numbers: GUID, port and port record row."""

    guid: Numbers
    port: Numbers
    row: Indexes

    @classmethod
    def of(cls, guids: list[str], ports: list[int], index: _PortIndex) -> _Ends:
        numbers, port = guid_numbers(guids), np.asarray(ports, dtype=np.uint64)
        return cls(numbers, port, index.find(numbers, port))

    def where(self, swap: NDArray[np.bool_], other: _Ends) -> _Ends:
        """These ends, but the *other* side's where *swap* is true."""
        return _Ends(
            np.where(swap, other.guid, self.guid),
            np.where(swap, other.port, self.port),
            np.where(swap, other.row, self.row),
        )


@dataclass(frozen=True, slots=True)
class _Kept:
    """The link record each cable was kept from, for the few cables whose rate needs more
    than their ports' rates."""

    links: LinkColumns
    records: Indexes  # each cable's record
    swapped: NDArray[np.bool_]  # for each record, whether its ends were swapped

    def width(self, cable: int) -> str:
        return self.links.widths[int(self.records[cable])]

    def ends(self, cable: int) -> CableKey:
        record, links = int(self.records[cable]), self.links
        a, b = (links.a[record], links.a_port[record]), (links.b[record], links.b_port[record])
        return (*b, *a) if self.swapped[record] else (*a, *b)


def _cables(links: LinkColumns, ports: _PortIndex, rates: PortRates) -> Cables:
    """Every cable once (the first record of a cable wins), ends in canonical order (the
    smaller (guid, port) first), in (guid, port) order of its ends, rated by
    :func:`_rated`. A whole column at a time in numpy: per-record Python was most of the
    child's work (benchmarks/PERFORMANCE.md, "UFM path")."""
    a, b = _Ends.of(links.a, links.a_port, ports), _Ends.of(links.b, links.b_port, ports)
    linked = _linked(ports, a.row, b.row)
    sides = (links.a, links.a_port, a.row), (links.b, links.b_port, b.row)
    unlisted = _unlisted(ports.records, *sides)
    swap = (a.guid > b.guid) | ((a.guid == b.guid) & (a.port > b.port))
    low, high = a.where(swap, b), b.where(swap, a)
    order = np.lexsort((high.port, high.guid, low.port, low.guid))  # stable: first record first
    order = order[run_starts(*(end[order] for end in (low.guid, low.port, high.guid, high.port)))]
    low_rows, high_rows = low.row[order], high.row[order]
    kept = _Kept(links, order, swap)
    rate, mismatches = _rated(low_rows, high_rows, rates, len(unlisted), kept)
    return Cables(_rows(low_rows), _rows(high_rows), rate, rates, linked, unlisted, mismatches)


def _rows(values: NDArray[Any]) -> Rows:
    rows: Rows = array("I")
    rows.frombytes(values.astype(np.uint32).tobytes())
    return rows


def _rated(
    a: Indexes, b: Indexes, rates: PortRates, unlisted: int, kept: _Kept
) -> tuple[Rows, Mismatches]:
    """Each cable's rate as an index into ``rates.table`` (which gains the rates the ports
    do not give): its ports' rate when they agree, else :func:`_cable_rate` (with the
    width and ends of the record it was *kept* from); an unlisted end has no rate."""
    table: list[Rate | None] = [*rates.table, None]
    no_rate = np.full(unlisted, len(rates.table), dtype=np.uint32)
    index = np.concatenate((np.frombuffer(rates.index, dtype=np.uint32), no_rate))
    at_a, at_b = index[a], index[b]
    complete = np.array([rate is not None and rate[0] != rates_.UNKNOWN for rate in table])
    agree = (at_a == at_b) & complete[at_a]
    found, mismatches = {rate: i for i, rate in enumerate(rates.table)}, Mismatches()
    # New rates get indexes after the ports' ones; one may reuse the no-rate index, which no
    # cable keeps (an unlisted end never agrees, so every such row is rewritten here).
    for cable in np.flatnonzero(~agree).tolist():  # the few that do not
        pa, pb = table[at_a[cable]], table[at_b[cable]]
        width = ufm_width(kept.width(cable))
        rate = _cable_rate(mismatches, width, pa, pb, partial(kept.ends, cable))
        at_a[cable] = found.setdefault(rate, len(found))
    rates.table[:] = found
    return _rows(at_a), mismatches


def _unlisted(records: int, *sides: tuple[list[str], list[int], Indexes]) -> list[tuple[str, int]]:
    """The link ends no port record names, in order of appearance: each side's (GUIDs,
    ports, end rows) has its missing rows (-1) set to rows past the port records."""
    unlisted: dict[tuple[str, int], int] = {}
    for guids, ports, rows in sides:
        for i in np.flatnonzero(rows < 0).tolist():
            rows[i] = unlisted.setdefault((guids[i], ports[i]), records + len(unlisted))
    return list(unlisted)


def _linked(ports: _PortIndex, *end_rows: Indexes) -> bytearray:
    """A flag per port record: 0 for a port no link names. A record that a later one of the
    same port repeats is flagged 1 too, so each port counts once."""
    flags = bytearray(ports.records)
    view = np.frombuffer(flags, dtype=np.uint8)
    view[ports.repeated()] = 1
    for rows in end_rows:
        view[rows[rows >= 0]] = 1
    return flags


def _cable_rate(
    mismatches: Mismatches,
    width: str,
    pa: Rate | None,
    pb: Rate | None,
    ends: Callable[[], CableKey],
) -> Rate:
    """The slower of the two ports' (width, speed); a port without a width takes the cable's.
    Ends that disagree are counted in *mismatches* (the first by its *ends*)."""
    ra = (pa[0] if pa[0] != rates_.UNKNOWN else width, pa[1]) if pa else None
    rb = (pb[0] if pb[0] != rates_.UNKNOWN else width, pb[1]) if pb else None
    if ra is None or rb is None:
        return ra or rb or (width, rates_.UNKNOWN)
    if ra != rb:
        if not mismatches.count:
            a, ap, b, bp = ends()
            mismatches.first = f"{a}[{ap}]-{b}[{bp}] {''.join(ra)} vs {''.join(rb)}"
        mismatches.count += 1
        return rates_.slower(ra, rb)
    return ra


def links_of(cables: dict[CableKey, Rate]) -> Links:
    """Cables by their ends as :class:`Links` columns, in (guid, port) order of their ends."""
    keys = sorted(cables)
    if not keys:
        return Links()
    a, a_port, b, b_port = map(list, zip(*keys, strict=True))
    width, speed = _columns_of(list(map(cables.__getitem__, keys)))
    return Links(a, a_port, b, b_port, width, speed)


def cables_of(links: Links) -> dict[CableKey, Rate]:
    """:func:`links_of` undone: each cable's rate by its ends."""
    ends = zip(links.a, links.a_port, links.b, links.b_port, strict=True)
    return dict(zip(ends, zip(links.width, links.speed, strict=True), strict=True))
