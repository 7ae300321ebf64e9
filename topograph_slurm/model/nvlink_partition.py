"""NVLink domains and partitions as NVIDIA's NVLink management (NMX, part of NetQ) reports
them: compute trays with their rack (DomainUUID) and place, their GPUs, and the partitions
those GPUs are in. Plain data, read from NMX's answers (``sources/nmx``) or simulated.

Why a model of its own: nvidia-smi on each node tells which domain a GPU registered with, but
not how the rack is partitioned. NMX knows both, centrally, for every tray, including trays
that are down and cannot be asked.
"""

from __future__ import annotations

from dataclasses import dataclass

#: NMX's word for a tray, GPU or partition in order.
HEALTHY = "HEALTHY"


@dataclass(frozen=True, slots=True)
class TrayPlace:
    """Where a compute tray sits: the chassis (rack) serial, its slot, tray index and host."""

    chassis: str = ""
    slot: int = 0
    tray: int = 0
    host: int = 0


@dataclass(frozen=True, slots=True)
class NvlinkTray:
    """One compute tray (a Slurm node): its name, NVLink domain, place, health, GPU ids."""

    name: str
    domain: str
    place: TrayPlace
    health: str
    gpus: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NvlinkGpu:
    """One GPU: its NMX id, health and the partition NMX lists it in ("" for none)."""

    id: str
    health: str = HEALTHY
    partition: str = ""


@dataclass(frozen=True, slots=True)
class NvlinkPartitionInfo:
    """One NMX partition: its id (NMX's partition number as text), name, domain, health and
    the GPU ids that are its members."""

    id: str
    name: str
    domain: str
    health: str
    gpus: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NvlinkInventory:
    """What NMX reported: trays, GPUs (by id) and partitions, and where it came from."""

    source: str
    trays: tuple[NvlinkTray, ...]
    gpus: dict[str, NvlinkGpu]
    partitions: tuple[NvlinkPartitionInfo, ...]
