"""How many nodes a deployment needs, and the feasible deployment closest to one that does not
fit: what ``pools`` offers in its one error line when the nodes are too few."""

from __future__ import annotations

from topograph_slurm.analysis.placement.span import nodes_per_group
from topograph_slurm.model.pools import DECODE, PREFILL, Deployment, PoolSize


def nodes_needed(deployment: Deployment, gpus_per_node: int) -> int:
    """Every instance on whole nodes of its own: its TP group's nodes."""
    return sum(
        deployment.size(role).count * nodes_per_group(deployment.size(role).tp, gpus_per_node)
        for role in (PREFILL, DECODE)
    )


def with_ratio(
    prefill: int, decode: int, ratio: tuple[int, int], gpus_per_node: int, nodes: int
) -> Deployment:
    """The most instances *nodes* hold at the prefill:decode *ratio* (whole multiples of it),
    of TP sizes *prefill* and *decode*; at least one multiple (too many for the nodes then)."""
    one = Deployment(PoolSize(ratio[0], prefill), PoolSize(ratio[1], decode))
    times = max(1, nodes // nodes_needed(one, gpus_per_node))
    return Deployment(PoolSize(ratio[0] * times, prefill), PoolSize(ratio[1] * times, decode))


def closest(deployment: Deployment, gpus_per_node: int, nodes: int) -> Deployment | None:
    """The deployment with at most as many instances of each role that fits on *nodes*, keeps
    the prefill:decode ratio best, then uses the most nodes; None when not even one instance of
    each role fits. One candidate or two per decode count: the prefill counts nearest the
    ratio."""
    want_p, want_d = deployment.prefill.count, deployment.decode.count
    per_p = nodes_per_group(deployment.prefill.tp, gpus_per_node)
    per_d = nodes_per_group(deployment.decode.tp, gpus_per_node)
    fitting = []
    for d in range(1, min(want_d, nodes // per_d) + 1):
        most_p = min(want_p, (nodes - d * per_d) // per_p)
        ideal = d * want_p // want_d
        for p in sorted({max(1, min(most_p, ideal)), max(1, min(most_p, ideal + 1))}):
            if p <= most_p:
                fitting.append((p, d))
    if not fitting:
        return None
    p, d = min(
        fitting,
        key=lambda c: (
            abs(c[0] * want_d - want_p * c[1]) / (c[1] * want_d),
            -(c[0] * per_p + c[1] * per_d),
            -c[1],
        ),
    )
    return Deployment(PoolSize(p, deployment.prefill.tp), PoolSize(d, deployment.decode.tp))
