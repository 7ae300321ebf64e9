"""EPLB's plan for a model: the hierarchical policy (expert groups packed onto the fast
domains so the domains' loads balance, hot experts replicated inside each domain, replicas
packed onto the domain's GPUs) when every domain holds as many EP GPUs, the groups divide
by the domains and the experts by the groups, else the global one (replicas over all GPUs
at once, groups ignored). DeepSeek's EPLB and vLLM fall back to the global policy when the
groups do not divide by the domains (vLLM's ``test_parameter_validation``); groups that do
not divide the experts cannot be packed either, so they fall back the same way.

The GPUs come in rank order with the domain of each. EPLB numbers GPUs domain by domain; a
job whose ranks interleave domains gets the same plan with each GPU's block of slots moved
to its rank, so slot ``s`` is always on rank ``s // slots_per_gpu``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from topograph_slurm.analysis.experts.balance import balanced_packing, balanced_packing_rows
from topograph_slurm.analysis.experts.estimate import contiguous, estimate, planned
from topograph_slurm.analysis.experts.replicate import replicate
from topograph_slurm.errors import UsageError
from topograph_slurm.model.experts import (
    GLOBAL,
    GROUPS_SPLIT_DOMAINS,
    GROUPS_SPLIT_EXPERTS,
    HIERARCHICAL,
    UNEVEN_DOMAINS,
    ExpertLayout,
    ExpertPlan,
    LayerPlan,
)


def plan_experts(
    loads: Sequence[Sequence[int]], replicas: int, groups: int, gpu_domains: Sequence[int]
) -> ExpertPlan:
    """The plan for *loads* (``[layer][logical expert]`` tokens) over the GPUs whose domains
    *gpu_domains* gives in rank order, and its estimate against the contiguous layout."""
    experts = len(loads[0])
    _check_layout(experts, replicas, groups, len(gpu_domains))
    order = sorted(range(len(gpu_domains)), key=gpu_domains.__getitem__)
    sizes = sorted(Counter(gpu_domains).values())
    domains = len(sizes)
    why_global = _why_global(experts, groups, domains, sizes[0] == sizes[-1])
    policy = GLOBAL if why_global else HIERARCHICAL
    layout = ExpertLayout(replicas, groups, len(gpu_domains), domains)
    packed_groups, packed_domains = (groups, domains) if policy == HIERARCHICAL else (1, 1)
    slots = [
        _layer(np.asarray(row, dtype=np.float32), layout, packed_groups, packed_domains)
        for row in loads
    ]
    layers = [_in_rank_order(slot, order, layout) for slot in slots]
    return ExpertPlan(
        layout,
        policy,
        why_global,
        layers,
        [estimate(row, contiguous(experts, layout.gpus), gpu_domains, groups) for row in loads],
        [
            estimate(row, planned(layer, layout), gpu_domains, groups)
            for row, layer in zip(loads, layers, strict=True)
        ],
    )


#: The most physical slots a layer may have: each one is a pass over its domain's experts,
#: and no EP deployment has more than a few thousand (DeepSeek-V3 serves 288 or 320).
MAX_REPLICAS = 65_536


def _check_layout(experts: int, replicas: int, groups: int, gpus: int) -> None:
    """A usage error for a layout EPLB cannot fill with these experts."""
    if replicas > MAX_REPLICAS:
        raise UsageError(f"--replicas {replicas} is more than {MAX_REPLICAS:,} slots")
    if gpus < 1 or replicas % gpus:
        raise UsageError(f"--replicas {replicas} must be a multiple of the {gpus} EP GPUs")
    if replicas < experts:
        raise UsageError(f"--replicas {replicas} is fewer than the {experts} logical experts")
    if groups < 1:
        raise UsageError(f"--groups {groups} must be at least 1")


def _why_global(experts: int, groups: int, domains: int, even: bool) -> str:
    """Which of ``model.experts.WHY_GLOBAL`` keeps the hierarchical policy out (empty when
    none does)."""
    if groups % domains:
        return GROUPS_SPLIT_DOMAINS
    if experts % groups:
        return GROUPS_SPLIT_EXPERTS
    return "" if even else UNEVEN_DOMAINS


_Slots = tuple[NDArray[np.intp], NDArray[np.intp], list[int]]


def _layer(row: NDArray[np.float32], layout: ExpertLayout, groups: int, domains: int) -> _Slots:
    """One layer in EPLB's GPU numbering: each slot's logical expert and replica rank, and
    each expert's replica count."""
    experts = len(row)
    group_size = experts // groups
    group_loads = row.reshape(groups, group_size).sum(axis=1, dtype=np.float32)
    by_group = balanced_packing(group_loads, domains)
    per_domain = groups // domains
    position = [by_group.pack[g] * per_domain + by_group.rank[g] for g in range(groups)]
    laid = sorted(range(groups), key=position.__getitem__)
    domain_experts = [g * group_size + k for g in laid for k in range(group_size)]
    slots_per_domain = layout.replicas // domains
    experts_per_domain = experts // domains
    slot_expert = np.zeros(layout.replicas, dtype=np.intp)
    slot_rank = np.zeros(layout.replicas, dtype=np.intp)
    counts = np.zeros(experts, dtype=np.intp)
    local = np.asarray(domain_experts).reshape(domains, experts_per_domain)
    per_copy = np.empty((domains, slots_per_domain), dtype=np.float32)
    copy_expert = np.empty((domains, slots_per_domain), dtype=np.intp)
    copy_rank = np.empty((domains, slots_per_domain), dtype=np.intp)
    for domain in range(domains):
        local_loads = row[local[domain]]
        copies = replicate(local_loads, slots_per_domain)
        shares = np.divide(local_loads, np.asarray(copies.counts, dtype=np.float32))
        per_copy[domain] = np.asarray(shares, dtype=np.float32)[copies.slot_expert]
        copy_expert[domain] = local[domain][copies.slot_expert]
        copy_rank[domain] = copies.slot_rank
        counts[local[domain]] = copies.counts
    pack, rank = balanced_packing_rows(per_copy, layout.gpus // domains)
    base = np.arange(domains)[:, None] * slots_per_domain
    target = base + pack * layout.slots_per_gpu + rank
    slot_expert[target] = copy_expert
    slot_rank[target] = copy_rank
    return slot_expert, slot_rank, counts.tolist()


def _in_rank_order(slots: _Slots, order: list[int], layout: ExpertLayout) -> LayerPlan:
    """EPLB's GPU ``j`` is rank ``order[j]``: its block of slots moved there."""
    slot_expert, slot_rank, counts = slots
    per_gpu = layout.slots_per_gpu
    gpu_of_rank = np.argsort(np.asarray(order))
    source = (gpu_of_rank[:, None] * per_gpu + np.arange(per_gpu)).ravel()
    return LayerPlan(slot_expert[source].tolist(), slot_rank[source].tolist(), counts)
