"""The bulk path: parse a regular dump with whole-chunk passes, no Python code per line.

Speed matters: a large rail-optimised fabric is tens of megabytes of text, and the whole
``generate`` should stay near a bare ``split()`` of every line, far below what a Python loop
over every line costs. Regular dumps therefore go through regex ``split``/``findall`` over
cache-sized chunks, then C-level ``map``/``compress`` over columns. On a large dump the second
share of the chunks, of equal parse cost, is read by a forked child (:mod:`.fork`) meanwhile.

Cables are read from the switch side only (a CA's port line repeats its switch's line), and
counts and summed hashes check that the dump is regular: every cable is listed from both ends
with the same ports, width and speed (the multiset of CA port lines equals that of switch
lines towards CAs, and switch-to-switch lines from the smaller GUID's end equal those from the
other end), and every block lists its ports in increasing order, none beyond its header's port
count. Together these give the reference parser's cable rules (a port carries one cable, both
ends agree) without a per-cable dictionary. Anything irregular returns None, and the reference
parser (:mod:`.reference`) decides and explains; for every dump this path accepts, both give the
same Fabric (the tests fuzz that on damaged real dumps).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, chain, compress, count, islice, pairwise, repeat
from operator import and_, eq, ge, gt, le, lt, mul, not_, or_, sub
from typing import Any

from topograph_slurm.model.fabric import Ca, Fabric, Switch
from topograph_slurm.sources.ibnetdiscover import fork
from topograph_slurm.sources.ibnetdiscover.links import links_from_columns
from topograph_slurm.sources.ibnetdiscover.reference import (
    BINARY_RE,
    ID_PREFIXES,
    NPORTS,
    PORTS,
    SKIPPED,
    State,
    note_portless,
    note_summaries,
    parse_lid,
)

_HEADER_RE = re.compile(
    r'\n(Switch|Ca|Rt)[ \t]*(\d+)[ \t]+"[SHR]-([0-9a-f]{16})"[ \t]*#[ \t]*"([^"\n]*)"([^\n]*)'
)
# The port lines' regexes accept no line that the reference's _PORT_RE rejects (the fuzz tests
# hold them to it): a port GUID of at most 16 digits, the description quoted, a width of at
# most two digits. A quantifier is possessive (``*+``, ``++``) where what follows it can never
# be what it gives back (a space after digits, a line break after a token), so the language
# is the same and the engine skips retrying each shorter run.
# a switch's port line; the width+speed token must end the line ("-f" extras go the slow way)
_SWITCH_PORT_RE = re.compile(
    r'\n\[(\d+)\][ \t]*"([SHR])-([0-9a-f]{16})"\[(\d+)\](?:\([0-9a-f]{1,16}\))?[ \t]*+#'
    r'[ \t]*+"[^\n]*" lid \d++ (\d{1,2}x\S++)(?=\r?\n|\Z)'
)
# a CA's port line towards a switch: checked against the switch's line for the same cable
_CA_PORT_RE = re.compile(
    r'\n\[(\d+)\]\([0-9a-f]{1,16}\)[ \t]*"S-([0-9a-f]{16})"\[(\d+)\][ \t]*#'
    r'[ \t]*+lid \d++ lmc \d++[ \t]++"[^\n]*" lid \d++ (\d{1,2}x\S++)(?=\r?\n|\Z)'
)
# a whole regular CA block: ids, header, one port line towards a switch (the common case, a
# single-port HCA), read in one regex pass instead of header, body, count and port passes
_CA_BLOCK_RE = re.compile(
    r"\n(?:vendid=0x[0-9a-f]+\ndevid=0x[0-9a-f]+\nsysimgguid=0x[0-9a-f]+\n(?:ca|rt)guid=0x[0-9a-f]+\n)?"
    r'(?:Ca|Rt)[ \t]*(\d+)[ \t]+"[HR]-([0-9a-f]{16})"[ \t]*#[ \t]*"([^"\n]*)"[ \t]*\r?'
    r'\n\[(\d+)\]\([0-9a-f]{1,16}\)[ \t]*"S-([0-9a-f]{16})"\[(\d+)\][ \t]*#'
    r'[ \t]*+lid \d++ lmc \d++[ \t]++"[^\n]*" lid \d++ (\d{1,2}x\S++)(?=\r?\n(?!\[)|\Z)'
)
_CA_HEADER_RE = re.compile(r"\n(?:Ca|Rt)")
_SWITCH_REST_RE = re.compile(r"[ \t]+(?:enhanced|base)[ \t]+port 0 lid (\d+) lmc \d+\r?")
_NEXT_HEADER_RE = re.compile(r"\n(?:Switch|Ca|Rt)")
_OTHER_RE = re.compile(
    r"\n(?![\[#\n]|[ \t\r]*(?:\n|\Z)|vendid=|devid=|sysimgguid=|switchguid=|caguid=|rtguid=)"
    r"[^\n]*"
)
# Chunks this small keep each chunk's text, line tuples and columns in the CPU cache, which
# beats fewer, larger chunks.
_CHUNK = 1 << 17


# Dumps at least this large parse their second half in a forked child (see .fork):
# below it the fork and the pickled result cost more than the second core saves.
_FORK_AT = 1 << 23
# What a byte of switch blocks costs to parse, with a byte of CA blocks (which one regex match
# takes whole) as 1: shares of equal cost finish together, shares of equal bytes do not.
_SWITCH_COST = 2


@dataclass(slots=True)
class _Accumulated:
    """Accumulators of the fast path across chunks: cable columns, each cable as a switch
    listed it (between switches, the one with the smaller GUID), and device columns.

    Plain lists, tuples, numbers and counters only (devices become objects in
    :func:`_finish`), so the share a forked child parsed comes back through pickle at C
    speed."""

    switches: list[tuple[str, str, int, str]] = field(default_factory=list)  # guid desc ports lid
    ca_guids: list[str] = field(default_factory=list)
    ca_descs: list[str] = field(default_factory=list)
    ca_nports: list[int] = field(default_factory=list)
    a_counts: list[int] = field(default_factory=list)  # cables kept from each switch, in order
    a_port: list[int] = field(default_factory=list)
    b: list[str] = field(default_factory=list)
    b_port: list[int] = field(default_factory=list)
    ws: list[str] = field(default_factory=list)
    b_switch: list[bool] = field(default_factory=list)  # the far end is a switch (its line says S)
    # switch-to-switch lines from the end with the smaller GUID and from the other end, as
    # multisets of (this end, port, far end, port, width+speed) (see _multiset)
    forward_cables: int = 0
    backward_cables: int = 0
    # switch lines towards CAs and port lines in CA blocks, as multisets of (CA, its port,
    # switch, its port, width+speed)
    to_ca: int = 0
    ca_lines: int = 0
    portless: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    tail: str = ""  # text after the last header: ids there mean the dump stops mid-block

    def __getstate__(self) -> dict[str, Any]:
        """Pickle each column of strings as one newline-joined string (none holds a newline):
        one by one, each memoised, the millions of strings of a large dump pickle slowly."""
        state = {name: getattr(self, name) for name in self.__slots__}
        for name in _STRINGS:
            state[name] = (len(state[name]), "\n".join(state[name]))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in _STRINGS:
            count, joined = state[name]
            state[name] = joined.split("\n") if count else []
        for name, value in state.items():
            setattr(self, name, value)

    def merge(self, later: _Accumulated) -> None:
        """Append what the chunks after ours found, as if one pass had read them all."""
        for name in _COLUMNS:
            getattr(self, name).extend(getattr(later, name))
        for name in _TOTALS:
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.tail = later.tail


_STRINGS = (
    *("ca_guids", "ca_descs", "b", "ws"),
    *("portless", "skipped"),
)
_COLUMNS = ("switches", "ca_nports", "a_counts", "a_port", "b_port", "b_switch", *_STRINGS)
_TOTALS = ("forward_cables", "backward_cables", "to_ca", "ca_lines")


def parse(text: str, source: str, fork_at: int = _FORK_AT) -> Fabric | None:
    """Parse a regular dump in bulk; None when the line-by-line parser must decide.

    A dump of *fork_at* characters or more has its second half parsed by a forked child at
    the same time (when a second CPU is free); the result is the same either way."""
    first_line = text[: text.find("\n")] if "\n" in text else text
    skipped: list[str] = []
    if "\x00" in text or not _other_line(first_line, skipped):
        return None
    bounds = _chunk_bounds(text)
    acc = _chunks(text, bounds) if len(text) < fork_at else _chunks_in_two(text, bounds)
    if acc is None:
        return None
    acc.skipped[:0] = skipped
    return _finish(text, acc, source)


def _chunks_in_two(text: str, bounds: list[int]) -> _Accumulated | None:
    """:func:`_chunks`, the second half in a forked child while we read the first."""
    half = _balanced_half(text, bounds)
    second = fork.in_background(partial(_chunks, text, bounds[half - 1 :]))
    try:
        acc = _chunks(text, bounds[:half])
    except BaseException:
        second.cancel()
        raise
    if acc is None:
        second.cancel()
        return None
    rest = second.result()
    if rest is None:
        return None
    acc.merge(rest)
    return acc


def _balanced_half(text: str, bounds: list[int]) -> int:
    """The index into *bounds* that splits the chunks into two shares of about equal parse
    cost: a chunk of switch blocks costs :data:`_SWITCH_COST` times a chunk of CA blocks of
    the same size (ibnetdiscover prints all switches first, so byte halves are unequal)."""
    costs = [
        (end - start) * (_SWITCH_COST if text.startswith("\nSwitch", start) else 1)
        for start, end in pairwise(bounds)
    ]
    total = list(accumulate(costs))
    return bisect_left(total, total[-1] / 2) + 1


def _chunk_bounds(text: str) -> list[int]:
    """Offsets where chunks start (each at a header line, but the first), and the text's end."""
    bounds, start, size = [0], 0, len(text)
    while start < size:
        cut = start + _CHUNK
        m = _NEXT_HEADER_RE.search(text, cut) if cut < size else None
        start = m.start() if m else size
        bounds.append(start)
    return bounds


def _chunks(text: str, bounds: list[int]) -> _Accumulated | None:
    """The fast path over the chunks between consecutive *bounds*; None if one is irregular."""
    acc = _Accumulated()
    for start, end in pairwise(bounds):
        if not _chunk(text[start:end], acc):
            return None
    return acc


def _owns_port_line(after: str) -> bool:
    """Whether the text after a single-port CA block holds a port line before the next
    header: the line parser gives that line to the CA, so cutting the block out must not hand
    it to the switch block before it."""
    header = _NEXT_HEADER_RE.search(after)
    return "\n[" in (after[: header.start()] if header else after)


def _chunk(chunk: str, acc: _Accumulated) -> bool:
    """Devices and cables of one chunk (it starts at a header or at the start of the text):
    regular single-port CA blocks in one regex pass, then the rest block by block. When other
    CA blocks remain, the whole chunk goes block by block, so CAs keep the dump's order."""
    parts = _CA_BLOCK_RE.split(chunk)
    if len(parts) == 1:  # no such block (switch blocks): no copy of the chunk without them
        return _blocks(chunk, acc)
    step = _CA_BLOCK_RE.groups + 1
    rest = "".join(parts[::step])
    # the text after each block is part of rest: when rest holds no port line's start, none
    # gives a block a port line, and the check per CA block (a Python call each) is skipped
    owned = "\n[" in rest and any(map(_owns_port_line, parts[step::step]))
    if _CA_HEADER_RE.search(rest) or owned:
        return _blocks(chunk, acc)
    guids, own_port = parts[2::step], parts[4::step]
    nports, own_ports = _numbers(parts[1::step], NPORTS), _numbers(own_port, PORTS)
    if nports is None or own_ports is None or not all(map(le, own_ports, nports)):
        return False
    acc.ca_nports.extend(nports)
    acc.ca_guids.extend(guids)
    acc.ca_descs.extend(parts[3::step])
    rows = zip(guids, own_port, parts[5::step], parts[6::step], parts[7::step], strict=True)
    acc.ca_lines += _multiset(rows)
    if not _blocks(rest, acc):
        return False
    if not _NEXT_HEADER_RE.search(parts[-1]):
        acc.tail = parts[-1]  # the last block was a CA block: what follows it ends the chunk
    return True


def _blocks(chunk: str, acc: _Accumulated) -> bool:
    """Devices and cables of a text of whole blocks (and lines between them), header by
    header."""
    parts = _HEADER_RE.split(chunk)
    words, nports, guids = parts[1::6], parts[2::6], parts[3::6]
    descs, rests, bodies = parts[4::6], parts[5::6], parts[6::6]
    if "\n[" in parts[0]:
        return False
    is_switch = list(map(eq, words, repeat("Switch")))
    is_ca = list(map(not_, is_switch))
    counts = list(map(str.count, bodies, repeat("\n[")))
    # port lines must have the layout of their block's kind, so each side is read from the
    # bodies of its kind only (a moved line cannot be attributed to the wrong device)
    ca_side = _CA_PORT_RE.findall("".join(compress(bodies, is_ca)))
    # split, not findall: the groups come back as one flat list, sliced into columns in C
    ports = _SWITCH_PORT_RE.split("".join(compress(bodies, is_switch)))
    # the other lines: with switch blocks only, those the port lines leave between them (each
    # piece starts at a line break); with CA blocks too, every body, so they keep their order
    others = [parts[0], "".join(ports[::6])] if not any(is_ca) else [parts[0], *bodies]
    if not _other_lines(others, acc.skipped):
        return False
    ca_counts, lengths = list(compress(counts, is_ca)), list(compress(counts, is_switch))
    if len(ca_side) != sum(ca_counts) or len(ports) // 6 != sum(lengths):
        return False
    port_counts = _numbers(nports, NPORTS)
    if port_counts is None or not _devices(acc, is_switch, port_counts, guids, descs, rests):
        return False
    if ca_side and not _ca_lines(
        acc, ca_side, list(compress(guids, is_ca)), ca_counts, list(compress(port_counts, is_ca))
    ):
        return False
    acc.portless.extend(compress(guids, map(not_, counts)))
    acc.tail = bodies[-1] if bodies else parts[0]
    own = list(chain.from_iterable(map(repeat, compress(guids, is_switch), lengths)))
    lines = _SwitchLines(own, *(ports[i::6] for i in range(1, 6)))
    return _cables(acc, lines, lengths, list(compress(port_counts, is_switch)))


def _ca_lines(
    acc: _Accumulated,
    rows: list[tuple[str, str, str, str]],
    guids: list[str],
    counts: list[int],
    nports: list[int],
) -> bool:
    """CA port lines (own port, switch, its port, width+speed; *counts* of them in the block
    of each of *guids*) into the summed hash; False when a block's ports are out of order or
    beyond its port count."""
    own_port, switch, switch_port, ws = zip(*rows, strict=True)
    if not _in_order(_numbers(list(own_port), PORTS), counts, nports):
        return False
    own = chain.from_iterable(map(repeat, guids, counts))
    acc.ca_lines += _multiset(zip(own, own_port, switch, switch_port, ws, strict=True))
    return True


def _multiset(rows: Iterable[tuple[str, ...]]) -> int:
    """A multiset of cable lines as one number: the sum of the squares of each line's hash.
    Equal multisets give equal sums. A tuple's hash is close to additive over its items (its
    rounds add and rotate, and a rotation is additive but for its carries), so two lines that
    swap their far ends (a CA line moved to another CA's block) often give the same plain sum,
    and a hash of the hash keeps that structure: hashing the hash again, the fuzz tests found
    such swaps accepted for about one hash seed in forty. Squaring breaks it: the swap changes
    the sum by twice the product of the two rows' differences, which is not zero."""
    hashes = list(map(hash, rows))
    return sum(map(mul, hashes, hashes))


def _numbers(texts: list[str], table: dict[str, int]) -> list[int] | None:
    """The values of digit strings by dictionary (cheaper than int(), and bounded: a number
    out of *table*'s range, which the reference parser rejects, gives None)."""
    try:
        return list(map(table.__getitem__, texts))
    except KeyError:
        return None


def _in_order(ports: list[int] | None, lengths: list[int], nports: list[int]) -> bool:
    """Whether each block (*lengths* lines each, in order) lists its ports in increasing
    order, so none twice, and none beyond its header's port count (*nports*).

    ibnetdiscover prints ports in order; a port listed twice (a doubled or a contradicting
    line) or out of order goes the slow way, which explains or accepts it."""
    if ports is None:
        return False
    ends = list(accumulate(lengths))
    # a port not above the one before it must be the first of its block
    if not set(ends).issuperset(compress(count(1), map(ge, ports, islice(ports, 1, None)))):
        return False
    last = map(ports.__getitem__, map(sub, compress(ends, lengths), repeat(1)))
    return all(map(le, last, compress(nports, lengths)))


@dataclass(slots=True)
class _SwitchLines:
    """Switch port lines as columns: the switch, its port, the peer's kind letter (S, H, R),
    GUID and port, and the width+speed."""

    own: list[str]
    port: list[str]
    kind: list[str]
    peer: list[str]
    peer_port: list[str]
    ws: list[str]


def _cables(acc: _Accumulated, lines: _SwitchLines, lengths: list[int], nports: list[int]) -> bool:
    """Keep each cable once: switch-to-switch cables from the end with the smaller GUID,
    switch-to-CA cables from the switch, loop cables from the lower port. *lengths*: how many
    lines each switch lists, in order (*nports*: the port count of each); of the switch end
    only the number of cables kept from each switch is stored (its GUID, repeated that often,
    is column a). False when a block's ports are out of order or out of range."""
    own, port, peer, peer_port = lines.own, lines.port, lines.peer, lines.peer_port
    port_numbers = _numbers(port, PORTS)
    if port_numbers is None or not _in_order(port_numbers, lengths, nports):
        return False
    to_switch = list(map(eq, lines.kind, repeat("S")))
    to_ca = list(map(not_, to_switch))
    forward = list(map(lt, own, peer))
    keep = list(map(or_, forward, to_ca))
    if any(map(eq, own, peer)):
        loops = _loops(lines)
        if loops is None:
            return False
        for row in loops:
            keep[row] = True
    # far ports of the lines not kept equal near ports of kept ones (the hashes below)
    far_ports = _numbers(list(compress(peer_port, keep)), PORTS)
    if far_ports is None:
        return False
    ends = list(accumulate(lengths))
    acc.a_counts.extend(map(sum, map(keep.__getitem__, map(slice, [0, *ends[:-1]], ends))))
    acc.a_port.extend(compress(port_numbers, keep))
    acc.b.extend(compress(peer, keep))
    acc.b_port.extend(far_ports)
    acc.ws.extend(compress(lines.ws, keep))
    acc.b_switch.extend(compress(to_switch, keep))
    # every cable is listed from both ends, with the same ports, width and speed (checked in
    # _finish): the multisets of both ends' lines (see _multiset)
    ws = lines.ws
    near = zip(own, port, peer, peer_port, ws, strict=True)
    acc.forward_cables += _multiset(compress(near, map(and_, forward, to_switch)))
    far = zip(peer, peer_port, own, port, ws, strict=True)
    acc.backward_cables += _multiset(compress(far, map(and_, map(gt, own, peer), to_switch)))
    acc.to_ca += _multiset(compress(zip(peer, peer_port, own, port, ws, strict=True), to_ca))
    return True


def _loops(lines: _SwitchLines) -> list[int] | None:
    """The lines to keep of cables from a switch port to another port of the same switch
    (listed twice within one block): the one from the lower port, once. None unless every
    loop line has its mirror."""
    rows: dict[tuple[str, ...], int] = {}
    columns = (lines.own, lines.port, lines.kind, lines.peer_port, lines.ws)
    for row in compress(range(len(lines.own)), map(eq, lines.own, lines.peer)):
        rows.setdefault(tuple(column[row] for column in columns), row)
    keep = []
    for (guid, port, _, peer_port, ws), row in rows.items():
        if port == peer_port or (guid, peer_port, "S", port, ws) not in rows:
            return None
        if int(port) <= int(peer_port):
            keep.append(row)
    return keep


def _line_number(text: str, line: str) -> int:
    """The 1-based number of the first line of *text* that reads *line* (trailing blanks and
    CRs aside, which the chunk passes may carry differently): a plain ``find`` could land
    inside a longer line, or nowhere."""
    match = re.search(rf"^{re.escape(line.rstrip())}[ \t\r]*$", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def _other_lines(texts: list[str], skipped: list[str]) -> bool:
    """Lines that are not topology, as the slow path judges them; False for anything the
    chunk regexes should have consumed (a header they could not read, binary data)."""
    for line in chain.from_iterable(map(_OTHER_RE.findall, texts)):
        if not _other_line(line[1:], skipped):
            return False
    return True


def _other_line(line: str, skipped: list[str]) -> bool:
    stripped = line.strip()
    if BINARY_RE.search(line) or stripped.startswith(("[", "Switch", "Ca", "Rt")):
        return False
    if stripped and not stripped.startswith(("#", *ID_PREFIXES, *SKIPPED)):
        skipped.append(line)
    return True


def _devices(
    acc: _Accumulated,
    is_switch: list[bool],
    nports: list[int],
    guids: list[str],
    descs: list[str],
    rests: list[str],
) -> bool:
    """One chunk's headers into the device columns; False on a damaged header line."""
    for guid, desc, n, rest in zip(
        compress(guids, is_switch),
        compress(descs, is_switch),
        compress(nports, is_switch),
        compress(rests, is_switch),
        strict=True,
    ):
        m = _SWITCH_REST_RE.fullmatch(rest)
        if m is None:
            return False
        acc.switches.append((guid, desc, n, m.group(1)))
    is_ca = list(map(not_, is_switch))
    if any(map(str.strip, compress(rests, is_ca))):
        return False  # text after a CA header's description: a damaged line
    acc.ca_guids.extend(compress(guids, is_ca))
    acc.ca_descs.extend(compress(descs, is_ca))
    acc.ca_nports.extend(compress(nports, is_ca))
    return True


def _fabric(acc: _Accumulated, source: str) -> Fabric | None:
    """Switch and Ca objects from the columns; None on any GUID with two blocks (counted: the
    dicts hold fewer entries than there were headers), which the slow path explains."""
    try:
        switches = {
            guid: Switch(guid, desc, n, parse_lid(lid)) for guid, desc, n, lid in acc.switches
        }
    except ValueError:  # a LID out of range
        return None
    objects = map(Ca, acc.ca_guids, acc.ca_descs, acc.ca_nports)
    cas = dict(zip(acc.ca_guids, objects, strict=True))
    if len(switches) + len(cas) != len(acc.switches) + len(acc.ca_guids):
        return None
    if (not switches and not cas) or switches.keys() & cas.keys():
        return None
    return Fabric(switches, cas, source=source)


def _finish(text: str, acc: _Accumulated, source: str) -> Fabric | None:
    fab = _fabric(acc, source)
    if fab is None:
        return None
    # A cable seen from one end only (a peer without a block, a truncated block, a lost
    # header line) or whose ends disagree on a port, width or speed unbalances these sums, so
    # every cable end is a device with a block; otherwise the slow path explains.
    if acc.to_ca != acc.ca_lines or acc.forward_cables != acc.backward_cables:
        return None
    if "vendid=" in acc.tail:
        return None
    # each cable end as the very string that keys its device: the analysis then matches GUIDs
    # in its sets and dicts by identity, not by comparing text
    a = list(chain.from_iterable(map(repeat, fab.switches, acc.a_counts)))
    keys = dict(zip(fab.switches, fab.switches, strict=True))
    keys.update(zip(fab.cas, fab.cas, strict=True))
    b = list(map(keys.get, acc.b, acc.b))
    fab.links = links_from_columns(a, acc.a_port, b, acc.b_port, acc.ws)
    # every cable was kept from a switch's line, which names its far end's kind: the sums above
    # proved each S end a switch's block and each H/R end a CA's
    fab.links.b_switch = acc.b_switch
    st = State(fab.source, fabric=fab, portless=acc.portless)
    if acc.skipped:
        st.skipped = len(acc.skipped)
        st.first_skipped = _line_number(text, acc.skipped[0])
    if acc.portless:
        # only the few portless GUIDs are looked up, not a set of every cable end built
        note_portless(st, set(acc.portless).intersection(chain(a, b)))
    note_summaries(st)
    return fab
