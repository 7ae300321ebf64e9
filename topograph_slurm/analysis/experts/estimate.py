"""What a layout does to one layer's traffic, so a plan can be judged before it is loaded.

Assumed: an expert's tokens are split evenly over its replicas (as EPLB assumes) and come
evenly from every EP rank (uniform routing: the sender of a token is any rank alike), and a
sender uses a replica inside its own domain when its domain holds one. Then the share of an
expert's tokens that leaves the sender's domain is the share of ranks in domains without a
replica of it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from topograph_slurm.model.experts import ExpertLayout, LayerEstimate, LayerPlan

#: ``(GPU, logical expert)``: one replica of the expert on the GPU (rank-order GPU index).
Placement = list[tuple[int, int]]


def contiguous(experts: int, gpus: int) -> Placement:
    """The default layout: one copy of every expert, experts laid over the GPUs in order
    (expert ``e`` on GPU ``e * gpus // experts``)."""
    return [(expert * gpus // experts, expert) for expert in range(experts)]


def planned(layer: LayerPlan, layout: ExpertLayout) -> Placement:
    """A plan's replicas: slot ``s`` on GPU ``s // slots_per_gpu``."""
    per_gpu = layout.slots_per_gpu
    return [(slot // per_gpu, expert) for slot, expert in enumerate(layer.physical_to_logical)]


def estimate(
    loads: Sequence[int], placement: Placement, gpu_domains: Sequence[int], groups: int
) -> LayerEstimate:
    """Busiest GPU over the mean, cross-domain share of tokens, groups split over domains."""
    copies = Counter(expert for _, expert in placement)
    gpu_load = [0.0] * len(gpu_domains)
    homes: dict[int, set[int]] = defaultdict(set)
    for gpu, expert in placement:
        gpu_load[gpu] += loads[expert] / copies[expert]
        homes[expert].add(gpu_domains[gpu])
    total = sum(loads)
    if not total:
        return LayerEstimate(1.0, 0.0, _split_groups(homes, len(loads), groups))
    domain_size = Counter(gpu_domains)
    outside = sum(
        loads[expert] * sum(n for d, n in domain_size.items() if d not in homes[expert])
        for expert in range(len(loads))
    )
    return LayerEstimate(
        max(gpu_load) * len(gpu_load) / total,
        outside / (total * len(gpu_domains)),
        _split_groups(homes, len(loads), groups),
    )


def _split_groups(homes: dict[int, set[int]], experts: int, groups: int) -> int:
    size = experts // groups
    spans = [
        set().union(*(homes[e] for e in range(g * size, (g + 1) * size))) for g in range(groups)
    ]
    return sum(len(span) > 1 for span in spans)
