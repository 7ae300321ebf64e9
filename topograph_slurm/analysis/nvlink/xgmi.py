"""An AMD node's xGMI hive: the GPUs ``rocm-smi --showtopo`` shows joined by Infinity Fabric.

One hive holding every GPU is the node's fast domain (as an NVLink clique is on NVIDIA), and a
healthy MI300X node is one hive of 8. Two or more groups (MI250/MI210 cards bridged in pairs,
a bridge missing) or no xGMI pair at all (PCIe cards, or a bridge the driver did not detect)
means a job spread over the node's GPUs crosses PCIe: a finding. A single-GPU node has nothing
to link and gives none. Pure.
"""

from __future__ import annotations

from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.model.result import Finding


def _groups(groups: tuple[tuple[int, ...], ...]) -> str:
    return " | ".join(",".join(str(gpu) for gpu in group) for group in groups)


def hive_findings(node: str, topo: GpuTopology) -> list[Finding]:
    """The node's xGMI finding (none on NVIDIA, on one GPU, or with one hive)."""
    if topo.vendor != "amd" or topo.gpu_count < 2:
        return []
    groups = topo.fast_groups
    if len(groups) == 1:
        return []
    if len(groups) == topo.gpu_count:
        what = f"{topo.gpu_count} GPUs, no xGMI link between any two (all PCIe)"
        return [Finding(FindingKind.XGMI_PCIE_ONLY, node, what)]
    what = f"{topo.gpu_count} GPUs in {len(groups)} xGMI groups: GPUs {_groups(groups)}"
    return [Finding(FindingKind.XGMI_SPLIT, node, what)]
