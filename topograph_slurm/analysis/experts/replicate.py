"""Redundant experts: *slots* physical replicas of *n* logical experts, each extra slot given
to the expert whose tokens per replica are highest now (EPLB's ``replicate_experts``: the
busiest replica's load is as low as this greedy can make it). Float32 as in EPLB; on equal
loads the lowest expert id wins, as torch's ``max`` picks the first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class Replication:
    """The logical expert of each slot (slot ``i < n`` holds expert ``i``), each slot's
    replica rank (0 for an expert's first copy) and each expert's replica count."""

    slot_expert: list[int]
    slot_rank: list[int]
    counts: list[int]


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
