"""The shapes of NMX's answers (msgspec Structs), decoded by UFM's one list decoder.

``/nmx/v1/compute-nodes`` is read as NetQ serves it (a real answer kept by NVIDIA topograph:
``ID``, ``Name``, ``DomainUUID``, ``GpuIDList``, ``Health``, ``LocationInfo``). ``/gpus`` and
``/partitions`` follow NetQ's NVLink-management documentation (GPU health and partition,
partitions with their id, name, domain, health and GPU members); no real answer of theirs
is public, so every field but the ids is optional. Unknown fields are ignored; a wrong
shape is one ParseError naming the answer, the entry and the field.
"""

from __future__ import annotations

import msgspec


class Location(msgspec.Struct, frozen=True):
    """A tray's place: chassis (rack) serial, slot, tray index, host."""

    chassis_serial: str = msgspec.field(default="", name="ChassisSerialNumber")
    slot: int = msgspec.field(default=0, name="SlotID")
    tray: int = msgspec.field(default=0, name="TrayIndex")
    host: int = msgspec.field(default=0, name="HostID")


class ComputeNode(msgspec.Struct, frozen=True):
    """One compute tray of ``/nmx/v1/compute-nodes``."""

    id: str = msgspec.field(name="ID")
    name: str = msgspec.field(name="Name")
    domain: str = msgspec.field(name="DomainUUID")
    gpus: list[str] = msgspec.field(default_factory=list, name="GpuIDList")
    health: str = msgspec.field(default="", name="Health")
    location: Location = msgspec.field(default_factory=Location, name="LocationInfo")


class Gpu(msgspec.Struct, frozen=True):
    """One GPU of ``/nmx/v1/gpus``: its id, health and partition (None: in none)."""

    id: str = msgspec.field(name="ID")
    health: str = msgspec.field(default="", name="Health")
    partition: int | None = msgspec.field(default=None, name="PartitionID")


class Partition(msgspec.Struct, frozen=True):
    """One partition of ``/nmx/v1/partitions``: NMX's partition number, name, domain,
    health and member GPU ids."""

    partition: int = msgspec.field(name="PartitionID")
    name: str = msgspec.field(default="", name="Name")
    domain: str = msgspec.field(default="", name="DomainUUID")
    health: str = msgspec.field(default="", name="Health")
    gpus: list[str] = msgspec.field(default_factory=list, name="GpuIDList")
