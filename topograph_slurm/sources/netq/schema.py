"""The shapes of NetQ's answers (msgspec Structs), decoded by UFM's one list decoder.

Only what the translation reads is declared; NetQ's other fields (layout, auto_tier, counts)
are ignored. A wrong shape is one ParseError naming the answer, the entry and the field.
"""

from __future__ import annotations

import msgspec


class Interface(msgspec.Struct, frozen=True):
    """One end of a link: the device's graph id and, on a single cable, its interface name."""

    node: str
    interface: str = ""


class Cable(msgspec.Struct, frozen=True):
    """One cable of a (compounded) link: its two ends."""

    interfaces: list[Interface]
    id: str = ""


class GraphLink(msgspec.Struct, frozen=True):
    """A link between two devices: its parallel cables in ``compounded_links``, or, for a
    single cable, its own two interfaces."""

    interfaces: list[Interface] = []
    compounded_links: list[Cable] = []
    id: str = ""


class Device(msgspec.Struct, frozen=True):
    """A switch or a host (``discovered_via_lldp``) in the graph."""

    id: str
    name: str
    device_type: str = ""
    tier: int = -1


class Tier(msgspec.Struct, frozen=True):
    """One tier group of the graph (``tier-1``, ``tier-unclassified``) and its devices."""

    compounded_nodes: list[Device] = []


class Graph(msgspec.Struct, frozen=True):
    """One premises' topology graph (``fetch-topology`` answers a list of them)."""

    nodes: list[Tier]
    links: list[GraphLink]


class Premises(msgspec.Struct, frozen=True):
    """A premises the account may see; ``config_key_viewed`` marks the ones with data."""

    opid: int
    name: str = ""
    config_key_viewed: bool = False


class Login(msgspec.Struct, frozen=True):
    """The answer of ``login`` and of ``select/opid``: a bearer token and the premises."""

    access_token: str
    premises: list[Premises] = []
