"""NMX's answers → :class:`NvlinkInventory`: trays, GPUs and partitions exactly as NMX lists
them. A GPU's partition comes from the partition's member list, else from the GPU's own
``PartitionID``; what that means for the blocks is the analysis' to say."""

from __future__ import annotations

from collections.abc import Sequence

from topograph_slurm.model.nvlink_partition import (
    NvlinkGpu,
    NvlinkInventory,
    NvlinkPartitionInfo,
    NvlinkTray,
    TrayPlace,
)
from topograph_slurm.sources.nmx.client import COMPUTE_NODES, GPUS, PARTITIONS
from topograph_slurm.sources.nmx.schema import ComputeNode, Gpu, Partition
from topograph_slurm.sources.ufm.schema import JsonText, decode_list


def inventory_from_nmx(
    compute_nodes: JsonText,
    gpus: Sequence[JsonText] = (),
    partitions: Sequence[JsonText] = (),
    source: str = "nmx",
) -> NvlinkInventory:
    """The inventory of one NMX: its compute nodes, and each domain's GPUs and partitions."""
    nodes = decode_list(compute_nodes, f"{source}{COMPUTE_NODES}", ComputeNode)
    parts = [
        part
        for text in partitions
        for part in decode_list(text, f"{source}{PARTITIONS}", Partition)
    ]
    member_of = {gpu: str(part.partition) for part in parts for gpu in part.gpus}
    gpu_records = {
        gpu.id: gpu for text in gpus for gpu in decode_list(text, f"{source}{GPUS}", Gpu)
    }
    known = {gpu for node in nodes for gpu in node.gpus} | set(gpu_records) | set(member_of)
    return NvlinkInventory(
        source=source,
        trays=tuple(_tray(node) for node in nodes),
        gpus={gpu: _gpu(gpu, gpu_records.get(gpu), member_of) for gpu in sorted(known)},
        partitions=tuple(
            NvlinkPartitionInfo(str(p.partition), p.name, p.domain, p.health.upper(), tuple(p.gpus))
            for p in parts
        ),
    )


def _tray(node: ComputeNode) -> NvlinkTray:
    where = node.location
    place = TrayPlace(where.chassis_serial, where.slot, where.tray, where.host)
    return NvlinkTray(node.name, node.domain, place, node.health.upper(), tuple(node.gpus))


def _gpu(gpu_id: str, record: Gpu | None, member_of: dict[str, str]) -> NvlinkGpu:
    """A GPU as NMX knows it; one no ``/gpus`` answer lists is taken as healthy."""
    if record is None:
        return NvlinkGpu(gpu_id, partition=member_of.get(gpu_id, ""))
    listed = "" if record.partition is None else str(record.partition)
    return NvlinkGpu(gpu_id, record.health.upper() or "HEALTHY", member_of.get(gpu_id, listed))
