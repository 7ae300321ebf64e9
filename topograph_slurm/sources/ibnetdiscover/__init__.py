"""Read ``ibnetdiscover`` output (plain, grouped ``-g`` and ports ``-p`` formats) into a Fabric.

Sysadmins feed us whatever they have: a fresh dump, a PuTTY log of one (CRLF, a banner, tabs
eaten, the switch prompt at the end), an old grouped dump from a man page. The parser therefore
recognises lines by their first character and one anchored regular expression, skips what is
plainly not topology (comments, ``ibwarn`` noise, chassis headings, prompts) and reports the
skipped lines in a :class:`~topograph_slurm.model.Note`, while anything that *looks* like
topology but is malformed raises :class:`~topograph_slurm.errors.ParseError` with its line.

Every cable is printed twice (once from each end); it becomes one row of :class:`Links`. A
peer that has no block of its own (an excerpt, or a CA ibnetdiscover could not query) is created
from the description printed next to it, with a Note. A dump that ends inside a block is an error: a
truncated dump silently missing half a scalable unit would produce a wrong topology.conf.

Speed matters: a 16,384-node rail-optimised fabric is ~85 MB of text and the whole ``generate``
should stay near a bare ``split()`` of every line, far below what a Python loop over 1.6 M lines
costs. Regular dumps therefore take a bulk path (regex ``split``/``findall`` over cache-sized
chunks, then C-level ``map``/``compress`` over columns, cables read from the switch side and
cross-checked by summed hashes), its second share, of equal cost, read by a forked child on
dumps of 8 MB or more;
anything irregular falls back to the line-by-line parser, which is the reference: both give the
same Fabric (the tests fuzz that).
"""

from __future__ import annotations

import gc
import re
import subprocess
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import accumulate, chain, compress, pairwise, repeat
from operator import and_, eq, gt, lt, mul, not_, or_
from pathlib import Path
from types import MemberDescriptorType
from typing import Any, TypeVar

from topograph_slurm import fork
from topograph_slurm.errors import CollectError, ParseError
from topograph_slurm.model.fabric import Ca, Fabric, Links, Note, Switch, normalize_guid

_HEX = r"[0-9a-fA-F]{1,16}"
_EXT = r"(?:\[ext \d+\])?"
# One port line of a node block, from a switch ("[p] "H-g"[q](pg) # "desc" lid N 4xNDR") or
# a CA ("[p](pg) "S-g"[q] # lid N lmc M "desc" lid N 4xNDR"); tabs are optional (PuTTY logs).
_PORT_RE = re.compile(
    rf"\[(\d+)\](?:\({_HEX}\))?{_EXT}\s*"
    rf'"([SHR])-({_HEX})"\[(\d+)\]{_EXT}\s*(?:\({_HEX}\))?\s*'
    r'#\s*(?:lid \d+ lmc \d+\s+)?"(.*)"\s+lid (\d+)\s+(\d*x|\?+)\s*(\S+)'
)
_SWITCH_RE = re.compile(
    rf'Switch\s*(\d+)\s+"S-({_HEX})"\s*#\s*"(.*)"\s+(?:enhanced|base)?\s*port 0 lid (\d+)'
    r"(?:\s+lmc\s+\d+)?\s*$"
)
_CA_RE = re.compile(rf'(?:Ca|Rt)\s*(\d+)\s+"[HR]-({_HEX})"\s*#\s*"(.*)"\s*(?:\(scp\))?\s*$')
# ibnetdiscover -p: "CA 78 1 0x946d… 4x HDR - SW 51 81 0x946d… ( 'desc' - 'peer desc' )"
_P_LINE_RE = re.compile(
    rf"(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x({_HEX})\s+(\d*x|\?+)\s*(.*?)\s+"
    rf"(?:-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x({_HEX})\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)"
    r"|'(.*)')\s*$"
)
_HEADER_START_RE = re.compile(r"(?:Switch|Ca|Rt)\s*\d")
_P_START_RE = re.compile(r"(SW|CA|RT)\s+\d+\s+\d+\s+0x")
_BINARY_RE = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")

KNOWN_SPEEDS = frozenset(
    {"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR", "GDR", "???"}
)
_SPEED_RANK = {s: i for i, s in enumerate(("???", "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR"))}
_SPEED_RANK.update({"HDR": 7, "NDR": 8, "XDR": 9, "GDR": 10})
# ibnetdiscover -p of older infiniband-diags prints rates instead of names
_RATE_NAMES = {"2.5 Gbps": "SDR", "5.0 Gbps": "DDR", "10.0 Gbps": "QDR", "14.0625 Gbps": "FDR"}
_CHUNK = 1 << 22  # characters per split() batch: bounds the transient list of line strings
_SKIPPED = ("Chassis ", "Non-Chassis Nodes")
_ID_PREFIXES = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")


def split_width_speed(text: str) -> tuple[str, str]:
    """``4xNDR`` / ``4x EDR`` / ``1xSDR`` / ``4x ???`` → (``4x``, ``NDR``)."""
    width, x, speed = text.strip().partition("x")
    if not x:
        return "", text.strip()
    speed = speed.strip()
    return width + "x", _RATE_NAMES.get(speed, speed)


def _worse(a: str, b: str) -> str:
    """The slower of two width+speed strings, so a degraded end is never hidden."""
    (wa, sa), (wb, sb) = split_width_speed(a), split_width_speed(b)
    lanes_a = int(wa[:-1]) if wa[:-1].isdigit() else 0
    lanes_b = int(wb[:-1]) if wb[:-1].isdigit() else 0
    rate_a = lanes_a * (_SPEED_RANK.get(sa, 0) + 1)
    rate_b = lanes_b * (_SPEED_RANK.get(sb, 0) + 1)
    return a if rate_a <= rate_b else b


def _lines(text: str) -> Iterator[list[str]]:
    """Batches of lines, so 85 MB of text never becomes 2 M line strings at once."""
    start, end_all = 0, len(text)
    while start < end_all:
        end = text.find("\n", start + _CHUNK)
        if end < 0:
            end = end_all
        yield text[start:end].split("\n")
        start = end + 1


@dataclass(slots=True)
class _Peer:
    """What a port line says about its far end, kept in case that device has no block."""

    kind: str
    desc: str
    line: int
    max_port: int


@dataclass(slots=True)
class _State:
    """Mutable parse state shared by the line handlers."""

    source: str
    fabric: Fabric = field(default_factory=Fabric)
    cables: dict[tuple[str, int, str, int], str] = field(default_factory=dict)
    peers: dict[str, _Peer] = field(default_factory=dict)
    guids: dict[str, str] = field(default_factory=dict)
    cur: str = ""  # GUID of the block whose port lines we are reading
    cur_line: int = 0
    cur_ports: int = 0
    pending_ids: int = 0  # line of a "vendid=" not yet followed by a node header
    portless: list[str] = field(default_factory=list)
    skipped: int = 0
    first_skipped: int = 0
    mismatches: int = 0
    first_mismatch: str = ""

    def guid(self, raw: str, line: int) -> str:
        """Canonical (interned, normalised) GUID string for *raw*."""
        known = self.guids.get(raw)
        if known is not None:
            return known
        try:
            norm = normalize_guid(raw)
        except ValueError:
            raise ParseError(f"bad GUID {raw!r}", line, self.source) from None
        norm = self.guids.setdefault(norm, norm)
        self.guids[raw] = norm
        return norm

    def error(self, message: str, line: int) -> ParseError:
        return ParseError(message, line, self.source)


def parse_ibnetdiscover(text: str, source: str = "") -> Fabric:
    """Parse ibnetdiscover output (plain, ``-g`` or ``-p``; detected) into a Fabric.

    Raises ParseError (with the line number where one applies) for input that is not an
    ibnetdiscover dump, is truncated, contains binary data or declares one GUID twice with
    different contents. Non-fatal oddities become ``fabric.notes``.
    """
    # Millions of short-lived tuples would trigger dozens of full collections; nothing
    # built here has reference cycles, so collecting afterwards is enough.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if _is_ports_format(text):
            return _parse_ports_format(text, source)
        _check_last_line(text, source)
        fabric = _fast_parse(text, source)
        if fabric is None:  # anything unusual: the line-by-line parser decides and explains
            fabric = _robust_parse(text, source)
        return fabric
    finally:
        if was_enabled:
            gc.enable()


def _robust_parse(text: str, source: str) -> Fabric:
    st = _State(source)
    st.fabric.source = source
    _scan(text, st)
    _finish(st)
    return st.fabric


# --------------------------------------------------------------------------------------------
# Fast path for well-formed dumps: whole-chunk regex passes and C-level map/zip/compress, no
# Python code per line. It reads cables from the switch side only (a CA's port line repeats
# its switch's line) and checks, by counts and summed hashes, that the dump is regular: each
# CA's block lists as many well-formed lines, with the same widths and speeds, as switches list
# towards it, and every switch-to-switch cable is listed from both ends with the same ports.
# Anything irregular returns None and the line-by-line parser decides and explains.

_FAST_HEADER_RE = re.compile(
    r'\n(Switch|Ca|Rt)[ \t]*(\d+)[ \t]+"[SHR]-([0-9a-f]{16})"[ \t]*#[ \t]*"([^"\n]*)"([^\n]*)'
)
# a switch's port line; the width+speed token must end the line ("-f" extras go the slow way)
_FAST_SWITCH_PORT_RE = re.compile(
    r'\n\[(\d+)\][ \t]*"([SHR])-([0-9a-f]{16})"\[(\d+)\](?:\([0-9a-f]+\))?[ \t]*#'
    r'[^\n]*" lid \d+ (\d+x\S+)(?=\r?\n|\Z)'
)
# a CA's port line towards a switch: checked against the switch's line for the same cable
_FAST_CA_PORT_RE = re.compile(
    r'\n\[\d+\]\([0-9a-f]+\)[ \t]*"S-[0-9a-f]{16}"\[\d+\][ \t]*#'
    r'[^\n]*" lid \d+ (\d+x\S+)(?=\r?\n|\Z)'
)
# a whole regular CA block: ids, header, one port line towards a switch (the common case, a
# single-port HCA), read in one regex pass instead of header, body, count and port passes
_FAST_CA_BLOCK_RE = re.compile(
    r"\n(?:vendid=0x[0-9a-f]+\ndevid=0x[0-9a-f]+\nsysimgguid=0x[0-9a-f]+\n(?:ca|rt)guid=0x[0-9a-f]+\n)?"
    r'(?:Ca|Rt)[ \t]*(\d+)[ \t]+"[HR]-([0-9a-f]{16})"[ \t]*#[ \t]*"([^"\n]*)"[ \t]*\r?'
    r'\n\[\d+\]\([0-9a-f]+\)[ \t]*"S-[0-9a-f]{16}"\[\d+\][ \t]*#'
    r'[^\n]*" lid \d+ (\d+x\S+)(?=\r?\n(?!\[)|\Z)'
)
_FAST_CA_HEADER_RE = re.compile(r"\n(?:Ca|Rt)")
_FAST_SWITCH_REST_RE = re.compile(r"[ \t]+(?:enhanced|base)[ \t]+port 0 lid (\d+) lmc \d+\r?")
_FAST_NEXT_HEADER_RE = re.compile(r"\n(?:Switch|Ca|Rt)")
_FAST_OTHER_RE = re.compile(
    r"\n(?![\[#\n]|[ \t\r]*(?:\n|\Z)|vendid=|devid=|sysimgguid=|switchguid=|caguid=|rtguid=)"
    r"[^\n]*"
)
_PORT_NUMBERS = {str(i): i for i in range(1024)}
# Chunks this small keep each chunk's text, line tuples and columns in the CPU cache: measured
# 1.5x faster than 4 MB chunks on a 16,384-node dump.
_FAST_CHUNK = 1 << 17


# Dumps at least this large parse their second half in a forked child (see topograph_slurm.fork):
# below it the fork and the pickled result cost more than the second core saves.
_FORK_AT = 1 << 23
# Switch port lines cost about twice as much per byte as CA blocks, which one regex match takes
# whole. On a 16k-node dump, splitting at equal cost (41 % of the text to the parent) instead of
# at equal bytes cut the parse's wall time by 0.28 s (median of 12 interleaved pairs).
_SWITCH_COST = 2


@dataclass(slots=True)
class _Fast:
    """Accumulators of the fast path across chunks: cable columns, each cable as a switch
    listed it (between switches, the one with the smaller GUID), and device columns.

    Plain lists, tuples, numbers and counters only (devices become objects in
    :func:`_fast_finish`), so the share a forked child parsed comes back through pickle at C
    speed."""

    switches: list[tuple[str, str, str, str]] = field(default_factory=list)  # guid desc ports lid
    ca_guids: list[str] = field(default_factory=list)
    ca_descs: list[str] = field(default_factory=list)
    ca_nports: list[int] = field(default_factory=list)
    a_counts: list[int] = field(default_factory=list)  # cables kept from each switch, in order
    a_port: list[int] = field(default_factory=list)
    b: list[str] = field(default_factory=list)
    b_port: list[int] = field(default_factory=list)
    ws: list[str] = field(default_factory=list)
    # switch-to-switch lines from the end with the smaller GUID and from the other end, as
    # multisets of (this end, port, far end, port) in summed hashes (see to_ca)
    forward_cables: int = 0
    backward_cables: int = 0
    # switch lines towards CAs and port lines in CA blocks, as multisets of the CA's GUID
    # (summed hashes: equal multisets give equal sums, unequal ones differ but for odds of
    # 2**-64) and of their widths+speeds
    to_ca: int = 0
    to_ca_ws: Counter[str] = field(default_factory=Counter)
    ca_lines: int = 0
    ca_ws: Counter[str] = field(default_factory=Counter)
    portless: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    tail: str = ""  # text after the last header: ids there mean the dump stops mid-block

    def __getstate__(self) -> dict[str, Any]:
        """Pickle each column of strings as one newline-joined string (none holds a newline):
        one by one, each memoised, the 1.5 M strings of a 16k-node dump took a second."""
        state = {name: getattr(self, name) for name in self.__slots__}
        for name in _FAST_STRINGS:
            state[name] = (len(state[name]), "\n".join(state[name]))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in _FAST_STRINGS:
            count, joined = state[name]
            state[name] = joined.split("\n") if count else []
        for name, value in state.items():
            setattr(self, name, value)

    def merge(self, later: _Fast) -> None:
        """Append what the chunks after ours found, as if one pass had read them all."""
        for name in _FAST_COLUMNS:
            getattr(self, name).extend(getattr(later, name))
        for name in _FAST_COUNTERS:
            getattr(self, name).update(getattr(later, name))
        for name in _FAST_TOTALS:
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.tail = later.tail


_FAST_STRINGS = (
    *("ca_guids", "ca_descs", "b", "ws"),
    *("portless", "skipped"),
)
_FAST_COLUMNS = ("switches", "ca_nports", "a_counts", "a_port", "b_port", *_FAST_STRINGS)
_FAST_COUNTERS = ("to_ca_ws", "ca_ws")
_FAST_TOTALS = ("forward_cables", "backward_cables", "to_ca", "ca_lines")


def _fast_parse(text: str, source: str, fork_at: int = _FORK_AT) -> Fabric | None:
    """Parse a regular dump in bulk; None when the line-by-line parser must decide.

    A dump of *fork_at* characters or more has its second half parsed by a forked child at
    the same time (when a second CPU is free); the result is the same either way."""
    first_line = text[: text.find("\n")] if "\n" in text else text
    skipped: list[str] = []
    if "\x00" in text or not _fast_other_line(first_line, skipped):
        return None
    bounds = _chunk_bounds(text)
    acc = _fast_chunks(text, bounds) if len(text) < fork_at else _fast_chunks_in_two(text, bounds)
    if acc is None:
        return None
    acc.skipped[:0] = skipped
    return _fast_finish(text, acc, source)


def _fast_chunks_in_two(text: str, bounds: list[int]) -> _Fast | None:
    """:func:`_fast_chunks`, the second half in a forked child while we read the first."""
    half = _balanced_half(text, bounds)
    second = fork.in_background(partial(_fast_chunks, text, bounds[half - 1 :]))
    try:
        acc = _fast_chunks(text, bounds[:half])
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
        cut = start + _FAST_CHUNK
        m = _FAST_NEXT_HEADER_RE.search(text, cut) if cut < size else None
        start = m.start() if m else size
        bounds.append(start)
    return bounds


def _fast_chunks(text: str, bounds: list[int]) -> _Fast | None:
    """The fast path over the chunks between consecutive *bounds*; None if one is irregular."""
    acc = _Fast()
    for start, end in pairwise(bounds):
        if not _fast_chunk(text[start:end], acc):
            return None
    return acc


def _fast_chunk(chunk: str, acc: _Fast) -> bool:
    """Devices and cables of one chunk (it starts at a header or at the start of the text):
    regular single-port CA blocks in one regex pass, then the rest block by block. When other
    CA blocks remain, the whole chunk goes block by block, so CAs keep the dump's order."""
    parts = _FAST_CA_BLOCK_RE.split(chunk)
    if len(parts) == 1:  # no such block (switch blocks): no copy of the chunk without them
        return _fast_blocks(chunk, acc)
    rest = "".join(parts[::5])
    if _FAST_CA_HEADER_RE.search(rest):
        return _fast_blocks(chunk, acc)
    guids = parts[2::5]
    acc.ca_nports.extend(_port_numbers(parts[1::5]))
    acc.ca_guids.extend(guids)
    acc.ca_descs.extend(parts[3::5])
    acc.ca_ws.update(parts[4::5])
    acc.ca_lines += sum(map(hash, guids))
    if not _fast_blocks(rest, acc):
        return False
    if not _FAST_NEXT_HEADER_RE.search(parts[-1]):
        acc.tail = parts[-1]  # the last block was a CA block: what follows it ends the chunk
    return True


def _fast_blocks(chunk: str, acc: _Fast) -> bool:
    """Devices and cables of a text of whole blocks (and lines between them), header by
    header."""
    parts = _FAST_HEADER_RE.split(chunk)
    words, nports, guids = parts[1::6], parts[2::6], parts[3::6]
    descs, rests, bodies = parts[4::6], parts[5::6], parts[6::6]
    if "\n[" in parts[0]:
        return False
    is_switch = list(map(eq, words, repeat("Switch")))
    is_ca = list(map(not_, is_switch))
    counts = list(map(str.count, bodies, repeat("\n[")))
    # port lines must have the layout of their block's kind, so each side is read from the
    # bodies of its kind only (a moved line cannot be attributed to the wrong device)
    ca_side = _FAST_CA_PORT_RE.findall("".join(compress(bodies, is_ca)))
    # split, not findall: the groups come back as one flat list, sliced into columns in C
    ports = _FAST_SWITCH_PORT_RE.split("".join(compress(bodies, is_switch)))
    # the other lines: with switch blocks only, those the port lines leave between them (each
    # piece starts at a line break); with CA blocks too, every body, so they keep their order
    others = [parts[0], "".join(ports[::6])] if not any(is_ca) else [parts[0], *bodies]
    if not _fast_other_lines(others, acc.skipped):
        return False
    if len(ca_side) != sum(compress(counts, is_ca)) or len(ports) // 6 != sum(
        compress(counts, is_switch)
    ):
        return False
    acc.ca_lines += sum(map(mul, map(hash, compress(guids, is_ca)), compress(counts, is_ca)))
    acc.ca_ws.update(ca_side)
    if not _fast_devices(acc, is_switch, nports, guids, descs, rests):
        return False
    acc.portless.extend(compress(guids, map(not_, counts)))
    acc.tail = bodies[-1] if bodies else parts[0]
    lengths = list(compress(counts, is_switch))
    own = list(chain.from_iterable(map(repeat, compress(guids, is_switch), lengths)))
    return _fast_cables(acc, _SwitchLines(own, *(ports[i::6] for i in range(1, 6))), lengths)


def _port_numbers(texts: list[str]) -> list[int]:
    """Port numbers of digit strings, by dictionary below 1024 (twice as fast as int())."""
    try:
        return list(map(_PORT_NUMBERS.__getitem__, texts))
    except KeyError:
        return list(map(int, texts))


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


def _fast_cables(acc: _Fast, lines: _SwitchLines, lengths: list[int]) -> bool:
    """Keep each cable once: switch-to-switch cables from the end with the smaller GUID,
    switch-to-CA cables from the switch, loop cables from the lower port. *lengths*: how many
    lines each switch lists, in order; of the switch end only the number of cables kept from
    each switch is stored (its GUID, repeated that often, is column a)."""
    own, port, peer, peer_port = lines.own, lines.port, lines.peer, lines.peer_port
    to_switch = list(map(eq, lines.kind, repeat("S")))
    to_ca = list(map(not_, to_switch))
    forward = list(map(lt, own, peer))
    keep = list(map(or_, forward, to_ca))
    if any(map(eq, own, peer)):
        loops = _fast_loops(lines)
        if loops is None:
            return False
        for row in loops:
            keep[row] = True
    ends = list(accumulate(lengths))
    acc.a_counts.extend(map(sum, map(keep.__getitem__, map(slice, [0, *ends[:-1]], ends))))
    acc.a_port.extend(_port_numbers(list(compress(port, keep))))
    acc.b.extend(compress(peer, keep))
    acc.b_port.extend(_port_numbers(list(compress(peer_port, keep))))
    acc.ws.extend(compress(lines.ws, keep))
    # every switch-to-switch cable is listed from both ends, with the same ports (checked in
    # _fast_finish): the two multisets of cables, as sums of hashes
    forward_cables = zip(own, port, peer, peer_port, strict=True)
    backward_cables = zip(peer, peer_port, own, port, strict=True)
    backward = map(and_, map(gt, own, peer), to_switch)
    acc.forward_cables += sum(map(hash, compress(forward_cables, map(and_, forward, to_switch))))
    acc.backward_cables += sum(map(hash, compress(backward_cables, backward)))
    acc.to_ca += sum(map(hash, compress(peer, to_ca)))
    acc.to_ca_ws.update(compress(lines.ws, to_ca))
    return True


def _fast_loops(lines: _SwitchLines) -> list[int] | None:
    """The lines to keep of cables from a switch port to another port of the same switch
    (listed twice within one block): the one from the lower port, once. None unless every
    loop line has its mirror."""
    rows: dict[tuple[str, ...], int] = {}
    columns = (lines.own, lines.port, lines.kind, lines.peer_port, lines.ws)
    for row in compress(range(len(lines.own)), map(eq, lines.own, lines.peer)):
        rows.setdefault(tuple(column[row] for column in columns), row)
    keep = []
    for (guid, port, _, peer_port, ws), row in rows.items():
        if (guid, peer_port, "S", port, ws) not in rows:
            return None
        if int(port) <= int(peer_port):
            keep.append(row)
    return keep


def _fast_other_lines(texts: list[str], skipped: list[str]) -> bool:
    """Lines that are not topology, as the slow path judges them; False for anything the
    chunk regexes should have consumed (a header they could not read, binary data)."""
    for line in chain.from_iterable(map(_FAST_OTHER_RE.findall, texts)):
        if not _fast_other_line(line[1:], skipped):
            return False
    return True


def _fast_other_line(line: str, skipped: list[str]) -> bool:
    stripped = line.strip()
    if _BINARY_RE.search(line) or stripped.startswith(("[", "Switch", "Ca", "Rt")):
        return False
    if stripped and not stripped.startswith(("#", *_ID_PREFIXES, *_SKIPPED)):
        skipped.append(line)
    return True


def _fast_devices(
    acc: _Fast,
    is_switch: list[bool],
    nports: list[str],
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
        m = _FAST_SWITCH_REST_RE.fullmatch(rest)
        if m is None:
            return False
        acc.switches.append((guid, desc, n, m.group(1)))
    is_ca = list(map(not_, is_switch))
    if any(map(str.strip, compress(rests, is_ca))):
        return False  # text after a CA header's description: a damaged line
    acc.ca_guids.extend(compress(guids, is_ca))
    acc.ca_descs.extend(compress(descs, is_ca))
    acc.ca_nports.extend(_port_numbers(list(compress(nports, is_ca))))
    return True


def _fast_fabric(acc: _Fast, source: str) -> Fabric | None:
    """Switch and Ca objects from the columns; None on any GUID with two blocks (counted: the
    dicts hold fewer entries than there were headers), which the slow path explains."""
    switches = {guid: Switch(guid, desc, int(n), _lid(lid)) for guid, desc, n, lid in acc.switches}
    columns = (acc.ca_guids, acc.ca_descs, acc.ca_nports)
    cas = dict(
        zip(acc.ca_guids, _construct(Ca, ("guid", "description", "nports"), columns), strict=True)
    )
    if len(switches) + len(cas) != len(acc.switches) + len(acc.ca_guids):
        return None
    if (not switches and not cas) or switches.keys() & cas.keys():
        return None
    return Fabric(switches, cas, source=source)


def _fast_finish(text: str, acc: _Fast, source: str) -> Fabric | None:
    fab = _fast_fabric(acc, source)
    if fab is None:
        return None
    # A cable seen from one end only (a peer without a block, a truncated block, a lost
    # header line) or a CA cable whose ends disagree on width/speed unbalances these sums, so
    # every cable end is a device with a block; otherwise the slow path explains. (The two ends
    # of a switch-to-switch cable are not compared on width/speed: they report one negotiated
    # link, so ibnetdiscover cannot print them differently.)
    # dict.__eq__: Counter's own == loops in Python (all counts here are positive)
    if not (
        acc.to_ca == acc.ca_lines
        and dict.__eq__(acc.to_ca_ws, acc.ca_ws)
        and acc.forward_cables == acc.backward_cables
    ):
        return None
    if "vendid=" in acc.tail:
        return None
    # each cable end as the very string that keys its device: the analysis then matches GUIDs
    # in its sets and dicts by identity, not by comparing text (0.1-0.2 s less at 16k nodes)
    a = list(chain.from_iterable(map(repeat, fab.switches, acc.a_counts)))
    keys = dict(zip(fab.switches, fab.switches, strict=True))
    keys.update(zip(fab.cas, fab.cas, strict=True))
    b = list(map(keys.get, acc.b, acc.b))
    fab.links = _links_from_columns(a, acc.a_port, b, acc.b_port, acc.ws)
    st = _State(fab.source, fabric=fab, portless=acc.portless)
    if acc.skipped:
        st.skipped = len(acc.skipped)
        st.first_skipped = text.count("\n", 0, text.find(acc.skipped[0])) + 1
    if acc.portless:
        # only the few portless GUIDs are looked up, not a set of every cable end built
        _note_portless(st, set(acc.portless).intersection(chain(a, b)))
    _note_summaries(st)
    return fab


def _is_ports_format(text: str) -> bool:
    """Whether the first topology line is an ``ibnetdiscover -p`` line."""
    for n, line in enumerate(text[: 1 << 16].splitlines()):
        stripped = line.strip()
        if stripped.startswith(("vendid=", "devid=", "Switch", "Ca", "Rt", "[")):
            return False
        if _P_START_RE.match(stripped):
            return True
        if n > 200:
            break
    return False


def _scan(text: str, st: _State) -> None:
    """The hot loop: dispatch each line on its first character."""
    port_match = _PORT_RE.match
    cables = st.cables
    peers = st.peers
    guids = st.guids
    lineno = 0
    for batch in _lines(text):
        for line in batch:
            lineno += 1
            c = line[:1]
            if c == "[":
                m = port_match(line)
                if m is None or not st.cur:
                    _bad_port_line(st, line, lineno, m is None)
                    continue
                port_s, kind, raw, peer_port_s, desc, _lid, width, speed = m.groups()
                peer = guids.get(raw) or st.guid(raw, lineno)
                port, peer_port = int(port_s), int(peer_port_s)
                me = st.cur
                if me < peer or (me == peer and port <= peer_port):
                    key = (me, port, peer, peer_port)
                else:
                    key = (peer, peer_port, me, port)
                ws = width + speed
                old = cables.get(key)
                if old is None:
                    cables[key] = ws
                elif old != ws:
                    _mismatch(st, key, old, ws, lineno)
                info = peers.get(peer)
                if info is None:
                    peers[peer] = _Peer(kind, desc, lineno, peer_port)
                elif peer_port > info.max_port:
                    info.max_port = peer_port
                st.cur_ports += 1
            elif c == "v" or c == "d" or c == "s" or c == "c" or c == "r":
                if line.startswith("vendid="):
                    st.pending_ids = lineno
                elif not line.startswith(_ID_PREFIXES):
                    _other_line(st, line, lineno)
            elif c == "S" or c == "C" or c == "R":
                if not _HEADER_START_RE.match(line):
                    _other_line(st, line, lineno)
                elif c == "S":
                    _switch_header(st, line, lineno)
                else:
                    _ca_header(st, line, lineno)
            elif c == "#" or not line.strip():
                continue
            elif c in " \t\r":
                _indented_line(st, line, lineno)
            else:
                _other_line(st, line, lineno)


def _indented_line(st: _State, line: str, lineno: int) -> None:
    """A line with leading blanks (CR from a terminal log, indented grouped output)."""
    stripped = line.strip()
    if stripped.startswith(_ID_PREFIXES):
        if stripped.startswith("vendid="):
            st.pending_ids = lineno
        return
    if _HEADER_START_RE.match(stripped):
        if stripped.startswith("S"):
            _switch_header(st, stripped, lineno)
        else:
            _ca_header(st, stripped, lineno)
    elif stripped.startswith("["):
        raise st.error(f"indented port line not understood: {stripped[:80]!r}", lineno)
    elif not stripped.startswith(_SKIPPED):
        _other_line(st, stripped, lineno)


def _bad_port_line(st: _State, line: str, lineno: int, malformed: bool) -> None:
    if _BINARY_RE.search(line):
        raise st.error("binary data in ibnetdiscover text", lineno)
    if malformed:
        raise st.error(f"malformed port line (truncated dump?): {line[:80]!r}", lineno)
    raise st.error("port line outside a Switch/Ca block (truncated dump?)", lineno)


def _other_line(st: _State, line: str, lineno: int) -> None:
    """Not topology: remember it for one summary Note; binary data is fatal."""
    if _BINARY_RE.search(line):
        raise st.error("binary data in ibnetdiscover text", lineno)
    if line.startswith(_SKIPPED) or line.startswith("#"):
        return
    if not st.skipped:
        st.first_skipped = lineno
    st.skipped += 1


def _mismatch(st: _State, key: tuple[str, int, str, int], old: str, new: str, line: int) -> None:
    """The two ends of one cable disagree on width/speed: keep the slower, note it."""
    st.cables[key] = _worse(old, new)
    if not st.mismatches:
        st.first_mismatch = f"{key[0]}[{key[1]}]-{key[2]}[{key[3]}] {old} vs {new} (line {line})"
    st.mismatches += 1


def _start_block(st: _State, guid: str, lineno: int) -> None:
    if st.cur and not st.cur_ports:
        st.portless.append(st.cur)
    st.cur, st.cur_line, st.cur_ports, st.pending_ids = guid, lineno, 0, 0


def _switch_header(st: _State, line: str, lineno: int) -> None:
    m = _SWITCH_RE.match(line)
    if m is None:
        raise st.error(f"malformed Switch header: {line[:80]!r}", lineno)
    nports, raw, desc, lid = m.groups()
    guid = st.guid(raw, lineno)
    fab = st.fabric
    old = fab.switches.get(guid)
    if old is not None or guid in fab.cas:
        _duplicate(st, guid, desc, old is not None and old.description == desc, lineno)
    else:
        fab.switches[guid] = Switch(guid, desc, int(nports), _lid(lid))
    _start_block(st, guid, lineno)


def _ca_header(st: _State, line: str, lineno: int) -> None:
    m = _CA_RE.match(line)
    if m is None:
        raise st.error(f"malformed Ca header: {line[:80]!r}", lineno)
    nports, raw, desc = m.groups()
    guid = st.guid(raw, lineno)
    fab = st.fabric
    old = fab.cas.get(guid)
    if old is not None or guid in fab.switches:
        _duplicate(st, guid, desc, old is not None and old.description == desc, lineno)
    else:
        fab.cas[guid] = Ca(guid, desc, int(nports))
    _start_block(st, guid, lineno)


def _lid(text: str) -> int | None:
    """LID 0 and 65535 (0xffff, permissive/unassigned) mean "no LID"."""
    lid = int(text)
    return None if lid in (0, 0xFFFF) else lid


def _duplicate(st: _State, guid: str, desc: str, same: bool, lineno: int) -> None:
    """A GUID with two blocks: identical repeats are noted, conflicting ones are fatal."""
    if not same:
        raise st.error(f"GUID {guid} declared twice with different type or description", lineno)
    st.fabric.notes.append(
        Note("duplicate-block", guid, f"GUID {guid} has a second identical block (line {lineno})")
    )


def _finish(st: _State) -> None:
    """Checks that need the whole dump, then the links and devices seen only as peers."""
    if st.pending_ids:
        raise st.error(
            "dump ends inside a node block (ids without a Switch/Ca line)", st.pending_ids
        )
    if st.cur and not st.cur_ports:
        st.portless.append(st.cur)
    fab = st.fabric
    if not fab.switches and not fab.cas:
        raise ParseError("no InfiniBand devices found (not ibnetdiscover output?)", None, st.source)
    _check_last_block(st)
    fab.links = _build_links(st.cables)
    _add_peer_only_devices(st)
    _note_portless(st, {g for a, _, b, _ in st.cables for g in (a, b)})
    _note_summaries(st)


def _check_last_line(text: str, source: str) -> None:
    """A last line without newline whose speed is no known name was cut mid-line."""
    if text.endswith("\n"):
        return
    tail = text[text.rfind("\n") + 1 :]
    m = _PORT_RE.match(tail.lstrip())
    if m is not None and m.group(8) not in KNOWN_SPEEDS:
        raise ParseError(f"dump cut mid-line: {tail[:80]!r}", text.count("\n") + 1, source)


def _check_last_block(st: _State) -> None:
    """ibnetdiscover lists every cable from both ends; if the final block lists fewer ports
    than other blocks link to it, the dump was cut inside that block."""
    last = st.cur
    if not last or last not in st.peers:
        return
    linked = sum(1 for a, _, b, _ in st.cables if a == last or b == last)
    if linked > st.cur_ports:
        raise st.error(
            f"dump appears truncated: last block {last} lists {st.cur_ports} port(s) but "
            f"{linked} cable(s) lead to it",
            st.cur_line,
        )


def _build_links(cables: dict[tuple[str, int, str, int], str]) -> Links:
    """One row per cable (keys already in canonical end order), in first-seen order."""
    if not cables:
        return Links()
    a, a_port, b, b_port = (list(col) for col in zip(*cables, strict=True))
    return _links_from_columns(a, a_port, b, b_port, list(cables.values()))


def _links_from_columns(
    a: list[str], a_port: list[int], b: list[str], b_port: list[int], ws: list[str]
) -> Links:
    """Links from columns; width+speed strings are split once per distinct value."""
    widths = {w: split_width_speed(w)[0] for w in set(ws)}
    speeds = {w: split_width_speed(w)[1] for w in widths}
    return Links(
        a, a_port, b, b_port, list(map(widths.__getitem__, ws)), list(map(speeds.__getitem__, ws))
    )


_T = TypeVar("_T")


def _construct(cls: type[_T], names: Sequence[str], columns: Sequence[Sequence[Any]]) -> list[_T]:
    """``[cls(*row) for row in zip(*columns)]``, fast. A frozen dataclass's __init__ costs
    ~1 µs (one object.__setattr__ per field); at 400k links that is a third of the parse.
    For a plain slots dataclass whose fields are exactly *names*, the same slot stores run
    in C-level map loops instead; any other class gets its real constructor."""
    descriptors = [cls.__dict__.get(name) for name in names]
    plain = (
        all(isinstance(d, MemberDescriptorType) for d in descriptors)
        and tuple(f.name for f in fields(cls)) == tuple(names)  # type: ignore[arg-type]
        and not hasattr(cls, "__post_init__")
    )
    if not plain:
        return list(map(cls, *columns))
    objects: list[_T] = list(map(object.__new__, repeat(cls, len(columns[0]))))
    for descriptor, column in zip(descriptors, columns, strict=True):
        deque(map(descriptor.__set__, objects, column), maxlen=0)  # type: ignore[union-attr]
    return objects


def _add_peer_only_devices(st: _State) -> None:
    """Peers with no block of their own become devices from the description next to them."""
    fab = st.fabric
    missing = [g for g in st.peers if g not in fab.switches and g not in fab.cas]
    for guid in sorted(missing):
        peer = st.peers[guid]
        if peer.kind == "S":
            fab.switches[guid] = Switch(guid, peer.desc, peer.max_port, None)
        else:
            fab.cas[guid] = Ca(guid, peer.desc, peer.max_port)
        fab.notes.append(
            Note(
                "no-block",
                guid,
                f"{guid} ({peer.desc!r}) appears only as a peer (first at line {peer.line}); "
                "created from that description",
            )
        )


def _note_portless(st: _State, linked: Set[str]) -> None:
    """Devices whose block lists no port and that no other block links to: isolated."""
    for guid in st.portless:
        if guid not in linked:
            st.fabric.notes.append(Note("isolated", guid, f"{guid} has no active link"))


def _note_summaries(st: _State) -> None:
    fab = st.fabric
    if st.skipped:
        fab.notes.append(
            Note(
                "skipped-lines",
                "",
                f"{st.skipped} line(s) that are not topology were ignored "
                f"(first at line {st.first_skipped})",
            )
        )
    if st.mismatches:
        fab.notes.append(
            Note(
                "link-mismatch",
                "",
                f"{st.mismatches} cable(s) reported with different width/speed at their two ends; "
                f"the slower was kept (first: {st.first_mismatch})",
            )
        )


# --------------------------------------------------------------------------------------------
# ibnetdiscover -p (ports report): one line per port, both ends and descriptions inline.


def _parse_ports_format(text: str, source: str) -> Fabric:
    st = _State(source)
    st.fabric.source = source
    down = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _P_LINE_RE.match(stripped)
        if m is None:
            if _P_START_RE.match(stripped) or _BINARY_RE.search(stripped):
                raise st.error(f"malformed ibnetdiscover -p line: {stripped[:80]!r}", lineno)
            _other_line(st, stripped, lineno)
            continue
        kind, lid, port, raw, width, speed, *peer_fields, lone_desc = m.groups()
        guid = st.guid(raw, lineno)
        if peer_fields[0] is None:
            _p_device(st, kind, guid, lone_desc, int(port), lid)
            down += 1
            continue
        p_kind, p_lid, p_port, p_raw, desc, p_desc = peer_fields
        peer = st.guid(p_raw, lineno)
        _p_device(st, kind, guid, desc, int(port), lid)
        _p_device(st, p_kind, peer, p_desc, int(p_port), p_lid)
        a, b = (guid, int(port)), (peer, int(p_port))
        key = (*a, *b) if a <= b else (*b, *a)
        ws = f"{width}{_RATE_NAMES.get(speed, speed)}"
        old = st.cables.get(key)
        if old is None:
            st.cables[key] = ws
        elif old != ws:
            _mismatch(st, key, old, ws, lineno)
    if not st.fabric.switches and not st.fabric.cas:
        raise ParseError("no InfiniBand devices found in ibnetdiscover -p text", None, source)
    st.fabric.links = _build_links(st.cables)
    if down:
        st.fabric.notes.append(
            Note("unconnected-ports", "", f"{down} port(s) listed without a peer (down/unused)")
        )
    _note_summaries(st)
    return st.fabric


def _p_device(st: _State, kind: str, guid: str, desc: str, port: int, lid: str) -> None:
    """Create or widen the device a ``-p`` line names; ``-p`` has no per-node header, so the
    port count is the highest port seen (and CAs are keyed by their port GUID)."""
    fab = st.fabric
    if kind == "SW":
        sw = fab.switches.get(guid)
        if sw is None:
            fab.switches[guid] = Switch(guid, desc, port, _lid(lid))
        elif port > sw.nports:
            sw.nports = port
        return
    ca = fab.cas.get(guid)
    if ca is None:
        fab.cas[guid] = Ca(guid, desc, port)
    elif port > ca.nports:
        ca.nports = port


# --------------------------------------------------------------------------------------------
# Running the real binary and reading saved dumps.


def read_ibnetdiscover(path: str | Path) -> Fabric:
    """Parse a saved dump; undecodable bytes become U+FFFD rather than a UnicodeDecodeError."""
    data = Path(path).read_bytes()
    return parse_ibnetdiscover(data.decode("utf-8", errors="replace"), source=str(path))


def run_ibnetdiscover(
    binary: str = "ibnetdiscover", args: Sequence[str] = (), timeout: float = 120.0
) -> str:
    """Run ``ibnetdiscover`` and return its stdout; every failure is one CollectError line."""
    cmd = [binary, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise CollectError(f"{binary}: command not found (install infiniband-diags?)") from None
    except PermissionError:
        raise CollectError(f"{binary}: permission denied") from None
    except subprocess.TimeoutExpired as exc:
        tail = _tail(exc.stderr)
        raise CollectError(
            f"{' '.join(cmd)}: timed out after {timeout:g}s" + (f": {tail}" if tail else "")
        ) from None
    if proc.returncode != 0:
        tail = _tail(proc.stderr) or "no error output"
        raise CollectError(f"{' '.join(cmd)}: exit status {proc.returncode}: {tail}")
    return proc.stdout.decode("utf-8", errors="replace")


def _tail(stderr: bytes | str | None, limit: int = 200) -> str:
    """The last non-empty stderr line(s), squeezed into one line of at most *limit* chars."""
    if not stderr:
        return ""
    text = stderr.decode("utf-8", errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines[-3:])
    return joined if len(joined) <= limit else "…" + joined[-limit:]
