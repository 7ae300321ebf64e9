"""GPUs per node, as the filters need it: the count most nodes have, and a finding when they
disagree.

``--tp-size`` arithmetic (how many nodes one tensor-parallel group spans) needs one GPU count
per partition. The snapshot's ``nvidia-smi topo -m`` lists every node's GPUs; a mixed cluster
(an 8-GPU node among 4-GPU trays, a GPU fallen off the bus) must not silently decide it, so the
most common count wins and the others are named.
"""

from __future__ import annotations

from collections.abc import Mapping

from topograph_slurm.analysis.fabric.block import typical_size
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Finding

#: Finding kind: the snapshot's nodes do not all have the same number of GPUs.


def typical_gpus(node_gpus: Mapping[str, int]) -> int:
    """The most common GPU count over nodes that have GPUs (larger on ties); 0 without any."""
    return typical_size(node_gpus.values())


def disagreement(subject: str, node_gpus: Mapping[str, int], chosen: int) -> Finding | None:
    """The finding for *subject* (a partition) when nodes with GPUs have different counts:
    each count with how many nodes have it and the first few of them, most common first."""
    by_count: dict[int, list[str]] = {}
    for node, count in node_gpus.items():
        if count:
            by_count.setdefault(count, []).append(node)
    if len(by_count) < 2:
        return None
    described = []
    for count in sorted(by_count, key=lambda c: (-len(by_count[c]), -c)):
        nodes = sorted(by_count[count], key=natural_key)
        shown = ", ".join(nodes[:3]) + (", ..." if len(nodes) > 3 else "")
        plural = "s" if len(nodes) > 1 else ""
        described.append(f"{count} GPUs on {len(nodes)} node{plural} ({shown})")
    return Finding(
        FindingKind.GPUS_PER_NODE_DISAGREE,
        subject,
        f"nodes disagree on GPUs per node (nvidia-smi topo -m): {'; '.join(described)}; "
        f"using {chosen}, set gpus_per_node in the filter config to choose",
    )
