"""The Fabric model: the one plain-data structure every source produces and every analysis reads.

Sources (ibnetdiscover text, UFM JSON, simulation) only *discover*: they fill a :class:`Fabric`
with switches, channel adapters (HCAs) and links exactly as the fabric reports them, without
interpreting names. Naming (which HCA belongs to which Slurm node) and all Slurm concepts live
downstream in ``topology/``; keeping the model dumb keeps every source interchangeable, so
``generate --ufm`` and ``generate --ibnetdiscover`` give byte-identical output for one fabric.

GUIDs are normalised to 16 lowercase hex digits without ``0x`` so that the same device reported
by two sources (or as ``0x8f10403960984`` and ``"H-0008f10403960984"`` in one dump) is one key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

#: 1-16 ASCII hex digits (lower case: normalize_guid lowers first).
_HEX_GUID = re.compile(r"[0-9a-f]{1,16}")


def normalize_guid(text: str) -> str:
    """Return *text* (``0x2c9…``, ``S-0002c9…``, ``2c9…``) as 16 lowercase hex digits.

    Raises ValueError when *text* is not a hexadecimal GUID of at most 64 bits.
    """
    raw = text.strip().lower()
    if raw[:2] in ("s-", "h-", "r-"):
        raw = raw[2:]
    if raw.startswith("0x"):
        raw = raw[2:]
    if not _HEX_GUID.fullmatch(raw):  # not int(raw, 16): it takes "_", signs and "٣"
        raise ValueError(f"not a 64-bit GUID: {text!r}")
    return raw.rjust(16, "0")


class DeviceKind(StrEnum):
    """What a GUID is: a switch ASIC or a channel adapter (HCA, SHARP node, router port)."""

    SWITCH = "switch"
    CA = "ca"


@dataclass(slots=True)
class Switch:
    """One switch ASIC. A director (MCS8500, CS7500) shows up as many of these."""

    guid: str
    description: str
    nports: int = 0
    lid: int | None = None


@dataclass(slots=True)
class Ca:
    """One channel adapter (HCA). ``description`` is its node description, usually
    ``<host> <hca>`` (``luna-0001 mlx5_0``), but firmware defaults and SHARP aggregation
    nodes appear here too — naming decides which become Slurm nodes."""

    guid: str
    description: str
    nports: int = 0


class Link(NamedTuple):
    """One cable between two ports, stored once with the smaller (guid, port) end first.

    ``width`` is the lane count as ibnetdiscover prints it (``4x``, ``1x``), ``speed`` the
    signalling rate name (``NDR``, ``HDR``, ``EDR``, ``FDR``, ``QDR``, ``DDR``, ``SDR``).

    A named tuple rather than a frozen dataclass: a 16,384-node fabric has ~400k links, and
    ``tuple.__new__(Link, row)`` builds one without running Python code (measured in
    benchmarks/PERFORMANCE.md). Fields, equality, hashing and immutability are those of the
    dataclass it replaces.
    """

    a_guid: str
    a_port: int
    b_guid: str
    b_port: int
    width: str
    speed: str

    @staticmethod
    def between(a_guid: str, a_port: int, b_guid: str, b_port: int, width: str, speed: str) -> Link:
        """Build a link in canonical end order, so the same cable seen from both ends is equal."""
        if (b_guid, b_port) < (a_guid, a_port):
            a_guid, a_port, b_guid, b_port = b_guid, b_port, a_guid, a_port
        return Link(a_guid, a_port, b_guid, b_port, width, speed)

    def peer(self, guid: str) -> str:
        """The GUID at the other end from *guid*."""
        return self.b_guid if guid == self.a_guid else self.a_guid

    @property
    def is_loop(self) -> bool:
        """A cable from a switch back to itself (lab loopback plugs)."""
        return self.a_guid == self.b_guid


@dataclass(slots=True)
class Links:
    """A fabric's cables as columns: row *i* is one cable, ``a[i]``/``a_port[i]`` to
    ``b[i]``/``b_port[i]`` at ``width[i]`` + ``speed[i]``, each cable once, its ends in either
    order (iterating and indexing give :class:`Link` tuples in canonical end order).

    Columns rather than a list of Link tuples: a 16,384-node fabric has ~400k cables, and the
    analysis reads them a column at a time (which ends are switches, which rates occur) with
    C-level ``map``/``compress``; building and unpacking 400k tuples cost more than that whole
    analysis. Either end order, so a source keeps each cable as it read it: ibnetdiscover
    lists a switch-to-HCA cable from the switch, whatever the GUIDs' order.
    """

    a: list[str] = field(default_factory=list)
    a_port: list[int] = field(default_factory=list)
    b: list[str] = field(default_factory=list)
    b_port: list[int] = field(default_factory=list)
    width: list[str] = field(default_factory=list)
    speed: list[str] = field(default_factory=list)
    #: What a source that read every cable from a switch knows anyway: ``a[i]`` is a switch on
    #: every row, and ``b_switch[i]`` says whether ``b[i]`` is one too. None when the source
    #: does not say; the analysis then looks each end up among the switches, two passes over
    #: every cable. Not part of equality: it restates what the devices say.
    b_switch: list[bool] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, links: Iterable[Link]) -> Links:
        """Columns from Link tuples."""
        columns = tuple(map(list, zip(*links, strict=True)))
        return cls(*columns) if columns else cls()

    def columns(self) -> tuple[list[str], list[int], list[str], list[int], list[str], list[str]]:
        return self.a, self.a_port, self.b, self.b_port, self.width, self.speed

    def append(self, link: Link) -> None:
        self.b_switch = None  # the new row's ends are not known to be switches
        self.a.append(link.a_guid)
        self.a_port.append(link.a_port)
        self.b.append(link.b_guid)
        self.b_port.append(link.b_port)
        self.width.append(link.width)
        self.speed.append(link.speed)

    def __len__(self) -> int:
        return len(self.a)

    def __iter__(self) -> Iterator[Link]:
        return map(Link.between, *self.columns())

    def __getitem__(self, i: int) -> Link:
        return Link.between(*(column[i] for column in self.columns()))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Note:
    """Something a source noticed while reading that is not fatal: a dangling port, an
    inactive link, a duplicate block. Carried into the report so nothing is silent."""

    kind: str
    guid: str
    message: str


@dataclass(slots=True)
class Fabric:
    """One discovered InfiniBand fabric (one subnet), as reported by a source."""

    switches: dict[str, Switch] = field(default_factory=dict)
    cas: dict[str, Ca] = field(default_factory=dict)
    links: Links = field(default_factory=Links)
    notes: list[Note] = field(default_factory=list)
    source: str = ""

    def kind_of(self, guid: str) -> DeviceKind | None:
        """Whether *guid* is a switch, a CA, or unknown to this fabric."""
        if guid in self.switches:
            return DeviceKind.SWITCH
        if guid in self.cas:
            return DeviceKind.CA
        return None
