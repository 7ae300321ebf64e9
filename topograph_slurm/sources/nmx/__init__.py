"""NVIDIA NMX (NVLink management, part of NetQ) as the source of NVLink domains and
partitions, read only.

* :mod:`.client` (:func:`collect_nmx`, :func:`fetch_nmx`): credentials read as UFM's are
  (``--nmx-credentials`` file, else ``NMX_USERNAME``/``NMX_PASSWORD``; never argv, never
  echoed) and the appliance client UFM and NetQ use: compute nodes, then each domain's GPUs
  and partitions;
* :mod:`.schema`: the answers' shapes;
* :mod:`.translate` (:func:`inventory_from_nmx`): the answers as an
  :class:`~topograph_slurm.model.nvlink_partition.NvlinkInventory`.
"""

from __future__ import annotations

from topograph_slurm.sources.nmx.client import NmxResponses, collect_nmx, fetch_nmx
from topograph_slurm.sources.nmx.translate import inventory_from_nmx

__all__ = ["NmxResponses", "collect_nmx", "fetch_nmx", "inventory_from_nmx"]
