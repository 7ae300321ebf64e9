"""NVIDIA NetQ as a fabric source for Ethernet/RoCE (Spectrum-X): the same :class:`Fabric`
ibnetdiscover and UFM give.

* :mod:`.client` (:func:`collect_netq`, :func:`fetch_netq`): credentials read as UFM's are
  (``--netq-credentials`` file, else ``NETQ_USERNAME``/``NETQ_PASSWORD``; never argv, never
  echoed) and the appliance client UFM uses (TLS with a CA bundle, timeouts, one deadline, a
  size cap per answer, retries): login, each premises, its topology graph;
* :mod:`.schema`: the answers' shapes;
* :mod:`.translate` (:func:`fabric_from_netq`): switches, host NIC ports and cables (Cumulus
  ``swpNsM`` breakouts, compounded parallel links) into the model.
"""

from __future__ import annotations

from topograph_slurm.sources.netq.client import NetqResponses, collect_netq, fetch_netq
from topograph_slurm.sources.netq.translate import fabric_from_netq

__all__ = ["NetqResponses", "collect_netq", "fabric_from_netq", "fetch_netq"]
