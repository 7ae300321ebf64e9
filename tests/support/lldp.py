"""json0 as lldpd writes it (``lldpcli -f json0 show neighbors details``), for tests: every
element a list of objects, a plain value as ``{"value": …}``, booleans for on/off. Made by
us from lldpd's writer (src/client/json_writer.c, display.c), not captured: which inputs are
real and which are made is in tests/fixtures/real/SOURCES.md."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Heard:
    """One local interface and its neighbour: chassis name (empty: none sent), port id type
    and value, port description, and whether the neighbour says it bridges."""

    interface: str
    chassis: str
    port: str
    port_type: str = "ifname"
    descr: str = ""
    bridge: bool = True


def json0(heard: list[Heard]) -> str:
    """A node's ``show neighbors details`` output with these neighbours (none: ``[{}]``)."""
    interfaces = [_interface(h, rid) for rid, h in enumerate(heard, start=1)]
    return json.dumps({"lldp": [{"interface": interfaces} if interfaces else {}]}, indent=2)


def _interface(h: Heard, rid: int) -> dict[str, object]:
    chassis: dict[str, object] = {"id": [{"type": "mac", "value": f"9c:63:c0:00:00:{rid:02x}"}]}
    if h.chassis:
        chassis["name"] = [{"value": h.chassis}]
    chassis["capability"] = [
        {"type": "Bridge", "enabled": h.bridge},
        {"type": "Router", "enabled": h.bridge},
        {"type": "Station", "enabled": not h.bridge},
    ]
    port: dict[str, object] = {"id": [{"type": h.port_type, "value": h.port}]}
    if h.descr:
        port["descr"] = [{"value": h.descr}]
    port["ttl"] = [{"value": "120"}]
    return {
        "name": h.interface,
        "via": "LLDP",
        "rid": str(rid),
        "age": "0 day, 00:10:00",
        "chassis": [chassis],
        "port": [port],
    }
