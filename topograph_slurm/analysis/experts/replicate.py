"""Redundant experts: *slots* physical replicas of *n* logical experts, each extra slot given
to the expert whose tokens per replica are highest now (EPLB's ``replicate_experts``: the
busiest replica's load is as low as this greedy can make it). Float32 as in EPLB; on equal
loads the lowest expert id wins, as torch's ``max`` picks the first.

Expert ``e``'s ``k``-th copy is offered at ``w_e / (k - 1)`` (float32: its load per replica
while it has ``k - 1``), which falls as ``k`` grows,
so the greedy hands out exactly the ``slots - n`` largest offers, in the order (offer
descending, expert id, ``k``): one sort of a candidate list instead of one pass over all
experts per extra slot. The candidates are each expert's offers down to a guessed threshold
(its fair share of the total); a guess too low for some expert is seen (its next offer would
have been taken) and doubled.
"""

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
    extra = slots - experts
    total = float(weights.sum(dtype=np.float64))
    # Offers per expert tried: its share of the slots at the fair threshold, and a margin.
    tried = np.floor(weights.astype(np.float64) * (slots / total)) + 2 if total else None
    while True:
        if tried is None:  # no load anywhere: every offer is 0, expert 0 wins each tie
            tried = np.zeros(experts)
            tried[0] = extra + 1
        chosen, enough = _largest_offers(weights, tried.astype(np.intp), extra)
        if enough:
            break
        tried = tried * 2 + 2
    expert, copy = chosen
    counts = np.bincount(expert, minlength=experts) + 1
    return Replication(
        list(range(experts)) + expert.tolist(), [0] * experts + (copy - 1).tolist(), counts.tolist()
    )


def _largest_offers(
    weights: NDArray[np.float32], tried: NDArray[np.intp], extra: int
) -> tuple[tuple[NDArray[np.intp], NDArray[np.intp]], bool]:
    """The *extra* best offers among copies ``2..tried[e]`` of each expert ``e``, in the
    order the greedy takes them, and whether no untried copy would have been among them."""
    tried = np.maximum(tried, 1)
    lengths = tried - 1
    expert = np.repeat(np.arange(len(weights)), lengths)
    start = np.cumsum(lengths) - lengths
    copy = np.arange(len(expert)) - np.repeat(start, lengths) + 2
    offer = weights[expert] / (copy - 1).astype(np.float32)
    order = np.lexsort((copy, expert, -offer))[:extra]
    if len(order) < extra:
        return (expert, copy), False
    if not extra:
        return (expert[order], copy[order]), True
    last_offer, last_expert = offer[order[-1]], expert[order[-1]]
    untried = weights / tried.astype(np.float32)
    beats = (untried > last_offer) | (
        (untried == last_offer) & (np.arange(len(weights)) < last_expert)
    )
    return (expert[order], copy[order]), not beats.any()
