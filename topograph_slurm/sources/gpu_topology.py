"""One node's GPU topology (and product names) from whichever vendor's tool printed them:
``rocm-smi --showtopo``/``--showproduct`` (AMD) or ``nvidia-smi topo -m``/``-q`` (NVIDIA),
told apart by rocm-smi's banners. Every reader of a saved capture (a snapshot, gres' and
draw's ``--topo-matrix``) goes through here, so each takes either vendor's."""

from __future__ import annotations

from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.sources.nvidia_smi import parse_product_names, parse_topo_matrix
from topograph_slurm.sources.rocm_smi import (
    looks_like_showproduct,
    looks_like_showtopo,
    parse_showproduct,
    parse_showtopo,
)


def parse_gpu_topology(text: str) -> GpuTopology:
    """The node's topology; ParseError when the text is neither tool's readable output."""
    return parse_showtopo(text) if looks_like_showtopo(text) else parse_topo_matrix(text)


def parse_gpu_products(text: str) -> dict[int, str]:
    """Each GPU's product name by index, from ``nvidia-smi -q`` or ``rocm-smi --showproduct``."""
    return parse_showproduct(text) if looks_like_showproduct(text) else parse_product_names(text)
