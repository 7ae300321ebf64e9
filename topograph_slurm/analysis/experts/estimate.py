"""What a layout does to one layer's traffic, so a plan can be judged before it is loaded.

Assumed: an expert's tokens are split evenly over its replicas (as EPLB assumes) and come
evenly from every EP rank (uniform routing: the sender of a token is any rank alike), and a
sender uses a replica inside its own domain when its domain holds one. Then the share of an
expert's tokens that leaves the sender's domain is the share of ranks in domains without a
replica of it.

The estimate is array arithmetic over the expert × domain presence matrix (a model has a few
hundred experts, a large job thousands of domains); the token counts themselves stay Python
integers, which may exceed what an ``int64`` product holds, so the sums come out exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from topograph_slurm.model.experts import ExpertLayout, LayerEstimate, LayerPlan


@dataclass(frozen=True, slots=True)
class Placement:
    """Replicas as two parallel arrays: replica ``i`` of logical expert ``experts[i]`` is on
    GPU ``gpus[i]`` (rank-order GPU index)."""

    gpus: NDArray[np.intp]
    experts: NDArray[np.intp]


def contiguous(experts: int, gpus: int) -> Placement:
    """The default layout: one copy of every expert, experts laid over the GPUs in order
    (expert ``e`` on GPU ``e * gpus // experts``)."""
    expert = np.arange(experts, dtype=np.intp)
    return Placement(expert * gpus // experts, expert)


def planned(layer: LayerPlan, layout: ExpertLayout) -> Placement:
    """A plan's replicas: slot ``s`` on GPU ``s // slots_per_gpu``."""
    slots = np.arange(len(layer.physical_to_logical), dtype=np.intp)
    return Placement(slots // layout.slots_per_gpu, np.asarray(layer.physical_to_logical))


def estimate(
    loads: Sequence[int], placement: Placement, gpu_domains: Sequence[int], groups: int
) -> LayerEstimate:
    """Busiest GPU over the mean, cross-domain share of tokens, groups split over domains."""
    experts = len(loads)
    domain_of, domain_size = _domains(gpu_domains)
    copies = np.bincount(placement.experts, minlength=experts).tolist()
    # Each expert's share per replica, as Python divides it (exact for any token count);
    # bincount then sums each GPU's shares in placement order, as a running sum would.
    share = np.array([load / n if n else 0.0 for load, n in zip(loads, copies, strict=True)])
    gpu_load = np.bincount(
        placement.gpus, weights=share[placement.experts], minlength=len(gpu_domains)
    )
    present = np.zeros((experts, len(domain_size)), dtype=bool)
    present[placement.experts, domain_of[placement.gpus]] = True
    split = _split_groups(present, groups)
    total = sum(loads)
    if not total:
        return LayerEstimate(1.0, 0.0, split)
    ranks_outside = ((~present) @ domain_size).tolist()
    outside = sum(load * ranks for load, ranks in zip(loads, ranks_outside, strict=True))
    return LayerEstimate(
        float(gpu_load.max()) * len(gpu_domains) / total,
        outside / (total * len(gpu_domains)),
        split,
    )


def _domains(gpu_domains: Sequence[int]) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    """Each GPU's domain as an index 0..D-1, and each domain's GPU count."""
    _, domain_of = np.unique(np.asarray(gpu_domains), return_inverse=True)
    return domain_of.ravel(), np.bincount(domain_of.ravel()).astype(np.int64)


def _split_groups(present: NDArray[np.bool_], groups: int) -> int:
    """Groups (consecutive equal runs of experts // groups experts; with groups that do not
    divide the experts, as the global fallback allows, the remainder is in none) whose
    replicas sit in more than one domain."""
    experts, domains = present.shape
    size = experts // groups
    grouped = present[: groups * size].reshape(groups, size, domains)
    spans = grouped.any(axis=1).sum(axis=1)
    return int((spans > 1).sum())
