"""One node's GPU topology from whichever vendor's tool printed it: ``rocm-smi --showtopo``
(AMD) or ``nvidia-smi topo -m`` (NVIDIA), told apart by rocm-smi's link-type banner. Every
reader of a saved matrix (a snapshot, gres' and draw's ``--topo-matrix``) goes through here,
so each takes either vendor's capture."""

from __future__ import annotations

from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.sources.nvidia_smi import parse_topo_matrix
from topograph_slurm.sources.rocm_smi import looks_like_showtopo, parse_showtopo


def parse_gpu_topology(text: str) -> GpuTopology:
    """The node's topology; ParseError when the text is neither tool's readable output."""
    return parse_showtopo(text) if looks_like_showtopo(text) else parse_topo_matrix(text)
