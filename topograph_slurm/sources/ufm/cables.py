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

import operator
import re
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, count, repeat
from typing import TypeAlias, cast

from topograph_slurm.model import rates as rates_
from topograph_slurm.model.fabric import Links
from topograph_slurm.sources.ibnetdiscover import fork
from topograph_slurm.sources.ufm import schema
from topograph_slurm.sources.ufm.columns import column, decode, ints, normal, starts
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


@dataclass(slots=True)
class PortRates:
    """Each port record's rate, as an index into the distinct rates UFM sends."""

    table: list[Rate]
    index: Rows

    def all(self) -> list[Rate]:
        """Each port record's rate (every port of one rate shares one tuple)."""
        return list(map(self.table.__getitem__, self.index))


def port_rates(ports: Sequence[schema.Port]) -> PortRates:
    """Each port's (width, speed) as ibnetdiscover names them, in answer order, worked out
    once per distinct pair UFM sends (a speed given as a number may be a port rate, which
    needs the width)."""
    pairs = list(zip(column(ports, "active_width"), column(ports, "active_speed"), strict=True))
    index = {pair: i for i, pair in enumerate(set(pairs))}
    return PortRates([_rate(*pair) for pair in index], array("I", map(index.__getitem__, pairs)))


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
        widths, speeds = [w for w, _ in self.rates.table], [s for _, s in self.rates.table]
        width, speed = (list(map(table.__getitem__, self.rate)) for table in (widths, speeds))
        return Links(
            list(map(guids.__getitem__, self.a)),
            list(map(numbers.__getitem__, self.a)),
            list(map(guids.__getitem__, self.b)),
            list(map(numbers.__getitem__, self.b)),
            width,
            speed,
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
    responses: UfmResponses, source: str, ids: fork.Feed[PortIds], rates: fork.Feed[PortRates]
) -> fork.Pending[Cables]:
    """The cables of large answers in a forked child, which reads the links while this
    process reads the ports, then takes the ports' identities and later their rates from the
    parent (*ids*, *rates*: put by the caller in that order). When no CPU is free, and
    whenever the child fails, they are computed here when asked for: a bad link raises its
    ParseError from here, after any error the devices side found in the ports."""
    compute = partial(read_cables, responses.links, source, ids.get, rates.get)
    big = len(responses.ports) + len(responses.links) >= _FORK_AT
    return fork.in_background(compute, ids, rates) if big else fork.Pending(compute)


def read_cables(
    links: JsonText,
    source: str,
    ids: Callable[[], PortIds],
    rates: Callable[[], PortRates],
) -> Cables:
    """The cables of a links answer (:class:`Cables`) between the ports *ids* gives, at the
    rates *rates* gives, each asked for only once needed (in a forked child: the parent
    works them out meanwhile). GUIDs only need to be equal here, not the devices side's
    objects, so none is interned."""
    columns = link_columns(links, source, None)
    port = ids()
    rows = dict(zip(zip(port.guids, port.numbers, strict=True), count()))
    return _cables(columns, rows, len(port.guids), rates)


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


def _cables(
    links: LinkColumns,
    rows: dict[tuple[str, int], int],
    records: int,
    rates: Callable[[], PortRates],
) -> Cables:
    """Every cable once (the first record of a cable wins), ends in canonical order, in
    (guid, port) order of its ends (*rows*: each port's record), rated by :func:`_rated`."""
    a, ap, b, bp = links.a, links.a_port, links.b, links.b_port
    ends_a, ends_b = list(zip(a, ap, strict=True)), list(zip(b, bp, strict=True))
    row_a, row_b = list(map(rows.get, ends_a)), list(map(rows.get, ends_b))
    linked = _linked(rows, records, row_a, row_b)
    unlisted = _unlisted(records, (ends_a, row_a), (ends_b, row_b))
    keys = list(zip(a, ap, b, bp, strict=True))
    for row in compress(range(len(keys)), map(operator.gt, ends_a, ends_b)):
        keys[row] = (b[row], bp[row], a[row], ap[row])  # canonical: the smaller end first
        row_a[row], row_b[row] = row_b[row], row_a[row]
    order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: a cable's first record first
    ordered = list(map(keys.__getitem__, order))
    first = starts(ordered)  # one record per cable
    order, ordered = list(compress(order, first)), list(compress(ordered, first))
    a_rows, b_rows = (
        array("I", map(cast(list[int], end_rows).__getitem__, order))  # no None left
        for end_rows in (row_a, row_b)
    )
    widths = list(map(links.widths.__getitem__, order))
    port_rates = rates()
    rate, mismatches = _rated(a_rows, b_rows, widths, port_rates, len(unlisted), ordered)
    return Cables(a_rows, b_rows, rate, port_rates, linked, unlisted, mismatches)


def _rated(
    a: Rows, b: Rows, widths: list[str], rates: PortRates, unlisted: int, keys: list[CableKey]
) -> tuple[Rows, Mismatches]:
    """Each cable's rate as an index into ``rates.table`` (which gains the rates the ports
    do not give): its ports' rate when they agree, else :func:`_cable_rate`; an unlisted end
    has no rate."""
    index = rates.index + array("I", [len(rates.table)]) * unlisted  # len(table): no rate
    table: list[Rate | None] = [*rates.table, None]
    at_a, at_b = list(map(index.__getitem__, a)), list(map(index.__getitem__, b))
    complete = {i for i, rate in enumerate(table) if rate and rate[0] != rates_.UNKNOWN}
    agree = map(operator.and_, map(operator.eq, at_a, at_b), map(complete.__contains__, at_a))
    found, mismatches = {rate: i for i, rate in enumerate(rates.table)}, Mismatches()
    # New rates get indexes after the ports' ones; one may reuse the no-rate index, which no
    # cable keeps (an unlisted end never agrees, so every such row is rewritten here).
    for row in compress(range(len(at_a)), map(operator.not_, agree)):  # the few that do not
        width = ufm_width(widths[row])
        rate = _cable_rate(mismatches, width, table[at_a[row]], table[at_b[row]], keys[row])
        at_a[row] = found.setdefault(rate, len(found))
    rates.table[:] = found
    return array("I", at_a), mismatches


def _unlisted(
    records: int, *sides: tuple[list[tuple[str, int]], list[int | None]]
) -> list[tuple[str, int]]:
    """The link ends no port record names, in order of appearance: each side's (ends, end
    rows) has their rows (None) set to rows past the port records."""
    unlisted: dict[tuple[str, int], int] = {}
    for ends, rows in sides:
        if None in rows:
            for i in [i for i, row in enumerate(rows) if row is None]:
                rows[i] = unlisted.setdefault(ends[i], records + len(unlisted))
    return list(unlisted)


def _linked(rows: dict[tuple[str, int], int], records: int, *ends: list[int | None]) -> bytearray:
    """A flag per port record: 0 for a port no link names. A record that a later one of the
    same port repeats is flagged 1 too, so each port counts once (as *rows* keeps it)."""
    if len(rows) == records and len(set(ends[0]).union(*ends[1:]).difference((None,))) == records:
        return bytearray(b"\x01") * records  # the usual case: every port is a link end
    flags = bytearray(records)
    if len(rows) < records:
        flags = bytearray(b"\x01") * records
        deque(map(flags.__setitem__, rows.values(), repeat(0)), maxlen=0)
    for end_rows in ends:
        known = cast(list[int], compress(end_rows, map(operator.is_not, end_rows, repeat(None))))
        deque(map(flags.__setitem__, known, repeat(1)), maxlen=0)
    return flags


def _cable_rate(
    mismatches: Mismatches, width: str, pa: Rate | None, pb: Rate | None, ends: CableKey
) -> Rate:
    """The slower of the two ports' (width, speed); a port without a width takes the cable's.
    Ends that disagree are counted in *mismatches*."""
    ra = (pa[0] if pa[0] != rates_.UNKNOWN else width, pa[1]) if pa else None
    rb = (pb[0] if pb[0] != rates_.UNKNOWN else width, pb[1]) if pb else None
    if ra is None or rb is None:
        return ra or rb or (width, rates_.UNKNOWN)
    if ra != rb:
        if not mismatches.count:
            a, ap, b, bp = ends
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
