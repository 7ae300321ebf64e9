"""The first, loop-by-loop implementation of ``experts``' EPLB policies and estimate, kept
only as a test oracle: the vectorised package code must give the same plan, float for float
(tests/unit/test_experts.py). Straight Python loops, an argmax per extra slot and a scan per
packed item — slow, and easy to read against EPLB's description."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from topograph_slurm.analysis.experts.hierarchy import _check_layout
from topograph_slurm.model.experts import GLOBAL, HIERARCHICAL, ExpertLayout, LayerEstimate

Placement = list[tuple[int, int]]


class Packing(NamedTuple):
    pack: list[int]
    rank: list[int]


class Replication(NamedTuple):
    slot_expert: list[int]
    slot_rank: list[int]
    counts: list[int]


class LayerPlan(NamedTuple):
    physical_to_logical: list[int]
    logical_to_physical: list[list[int]]
    replica_counts: list[int]


class ExpertPlan(NamedTuple):
    layout: ExpertLayout
    policy: str
    layers: list[LayerPlan]
    before: list[LayerEstimate]
    after: list[LayerEstimate]


def balanced_packing(weights: NDArray[np.float32], packs: int) -> Packing:
    """Items into *packs* equal-count packs, balancing their summed weight. One item per pack
    keeps item ``i`` in pack ``i`` (EPLB does so rather than sorting)."""
    count = len(weights)
    per_pack = count // packs
    if per_pack == 1:
        return Packing(list(range(count)), [0] * count)
    pack_of, rank_of = [0] * count, [0] * count
    loads = [np.float32(0)] * packs
    filled = [0] * packs
    for item in np.argsort(-weights, kind="stable").tolist():
        chosen = min((p for p in range(packs) if filled[p] < per_pack), key=loads.__getitem__)
        pack_of[item], rank_of[item] = chosen, filled[chosen]
        loads[chosen] = np.float32(loads[chosen] + weights[item])
        filled[chosen] += 1
    return Packing(pack_of, rank_of)


def replicate(weights: NDArray[np.float32], slots: int) -> Replication:
    """*slots* replicas of ``len(weights)`` experts, the extra ones to the hottest per replica."""
    experts = len(weights)
    counts = np.ones(experts, dtype=np.float32)
    slot_expert, slot_rank = list(range(experts)), [0] * experts
    for _ in range(slots - experts):
        hottest = int(np.argmax(weights / counts))
        slot_expert.append(hottest)
        slot_rank.append(int(counts[hottest]))
        counts[hottest] += 1
    return Replication(slot_expert, slot_rank, [int(c) for c in counts])


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


def plan_experts(
    loads: Sequence[Sequence[int]], replicas: int, groups: int, gpu_domains: Sequence[int]
) -> ExpertPlan:
    """The plan for *loads* (``[layer][logical expert]`` tokens) over the GPUs whose domains
    *gpu_domains* gives in rank order, and its estimate against the contiguous layout."""
    experts = len(loads[0])
    _check_layout(experts, replicas, groups, len(gpu_domains))
    order = sorted(range(len(gpu_domains)), key=gpu_domains.__getitem__)
    sizes = sorted(gpu_domains.count(d) for d in set(gpu_domains))
    even = sizes[0] == sizes[-1]
    domains = len(sizes)
    policy = HIERARCHICAL if even and groups % domains == 0 else GLOBAL
    layout = ExpertLayout(replicas, groups, len(gpu_domains), domains)
    packed_groups, packed_domains = (groups, domains) if policy == HIERARCHICAL else (1, 1)
    slots = [
        _layer(np.asarray(row, dtype=np.float32), layout, packed_groups, packed_domains)
        for row in loads
    ]
    width = max(max(counts) for _, _, counts in slots)
    layers = [_in_rank_order(slot, order, layout, width) for slot in slots]
    return ExpertPlan(
        layout,
        policy,
        layers,
        [estimate(row, contiguous(experts, layout.gpus), gpu_domains, groups) for row in loads],
        [
            estimate(row, planned(layer, layout), gpu_domains, groups)
            for row, layer in zip(loads, layers, strict=True)
        ],
    )


_Slots = tuple[list[int], list[int], list[int]]


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
    slot_expert, slot_rank, counts = [0] * layout.replicas, [0] * layout.replicas, [0] * experts
    for domain in range(domains):
        local = domain_experts[domain * experts_per_domain : (domain + 1) * experts_per_domain]
        local_loads = row[local]
        copies = replicate(local_loads, slots_per_domain)
        shares = np.divide(local_loads, np.asarray(copies.counts, dtype=np.float32))
        per_copy = np.asarray(shares, dtype=np.float32)[copies.slot_expert]
        on_gpus = balanced_packing(per_copy, layout.gpus // domains)
        base = domain * slots_per_domain
        for slot, (expert, rank) in enumerate(
            zip(copies.slot_expert, copies.slot_rank, strict=True)
        ):
            target = base + on_gpus.pack[slot] * layout.slots_per_gpu + on_gpus.rank[slot]
            slot_expert[target], slot_rank[target] = local[expert], rank
        for expert, count in enumerate(copies.counts):
            counts[local[expert]] = count
    return slot_expert, slot_rank, counts


def _in_rank_order(slots: _Slots, order: list[int], layout: ExpertLayout, width: int) -> LayerPlan:
    """EPLB's GPU ``j`` is rank ``order[j]``: its block of slots moved there, the
    logical-to-physical map built from the moved slots (replica rank order, -1 padded)."""
    slot_expert, slot_rank, counts = slots
    per_gpu = layout.slots_per_gpu
    physical, ranks = [0] * layout.replicas, [0] * layout.replicas
    for gpu, rank in enumerate(order):
        block = slice(gpu * per_gpu, (gpu + 1) * per_gpu)
        physical[rank * per_gpu : (rank + 1) * per_gpu] = slot_expert[block]
        ranks[rank * per_gpu : (rank + 1) * per_gpu] = slot_rank[block]
    to_physical = [[-1] * width for _ in counts]
    for slot, (expert, replica) in enumerate(zip(physical, ranks, strict=True)):
        to_physical[expert][replica] = slot
    return LayerPlan(physical, to_physical, counts)
