"""How many nodes a deployment needs, and the feasible deployment closest to one that does not
fit: what ``pools`` offers in its one error line when the nodes are too few.

An instance of TP *t* up to the GPUs per node *g* takes *t* GPUs of one node, ``g // t``
instances of one role sharing a node (a role's nodes are its own: prefill and decode never share
a node); a larger instance takes whole nodes, ``ceil(t / g)`` of them."""

from __future__ import annotations

from topograph_slurm.analysis.placement.span import nodes_per_group
from topograph_slurm.model.pools import DECODE, PREFILL, Deployment, PoolSize


def per_node(tp: int, gpus_per_node: int) -> int:
    """Instances of TP *tp* one node holds: ``g // tp`` when *tp* fits a node, else 1."""
    return max(1, gpus_per_node // tp)


def role_nodes(count: int, tp: int, gpus_per_node: int) -> int:
    """Nodes *count* instances of TP *tp* take (:func:`per_node` of them share a node)."""
    if tp <= gpus_per_node:
        return -(-count // per_node(tp, gpus_per_node))
    return count * nodes_per_group(tp, gpus_per_node)


def capacity(tp: int, gpus_per_node: int, nodes: int) -> int:
    """The most instances of TP *tp* that *nodes* nodes hold."""
    if tp <= gpus_per_node:
        return nodes * per_node(tp, gpus_per_node)
    return nodes // nodes_per_group(tp, gpus_per_node)


def nodes_needed(deployment: Deployment, gpus_per_node: int) -> int:
    """Each role on nodes of its own (:func:`role_nodes`)."""
    return sum(
        role_nodes(deployment.size(role).count, deployment.size(role).tp, gpus_per_node)
        for role in (PREFILL, DECODE)
    )


def with_ratio(
    prefill: int, decode: int, ratio: tuple[int, int], gpus_per_node: int, nodes: int
) -> Deployment:
    """The most instances *nodes* hold at the prefill:decode *ratio* (whole multiples of it),
    of TP sizes *prefill* and *decode*; at least one multiple (too many for the nodes then).
    Nodes needed grow with the multiple, so the largest that fits is a bisection."""

    def times(n: int) -> Deployment:
        return Deployment(PoolSize(ratio[0] * n, prefill), PoolSize(ratio[1] * n, decode))

    low, high = 1, max(1, nodes * gpus_per_node)  # every instance takes a GPU at least
    while low < high:
        middle = (low + high + 1) // 2
        if nodes_needed(times(middle), gpus_per_node) <= nodes:
            low = middle
        else:
            high = middle - 1
    return times(low)


def closest(deployment: Deployment, gpus_per_node: int, nodes: int) -> Deployment | None:
    """The deployment with at most as many instances of each role that fits on *nodes*, keeps
    the prefill:decode ratio best, then uses the most nodes; None when not even one instance of
    each role fits. One candidate or two per decode count: the prefill counts nearest the
    ratio."""
    want_p, want_d = deployment.prefill.count, deployment.decode.count
    tp_p, tp_d = deployment.prefill.tp, deployment.decode.tp
    fitting = []
    for d in range(1, min(want_d, capacity(tp_d, gpus_per_node, nodes)) + 1):
        left = nodes - role_nodes(d, tp_d, gpus_per_node)
        most_p = min(want_p, capacity(tp_p, gpus_per_node, left))
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
            -(role_nodes(c[0], tp_p, gpus_per_node) + role_nodes(c[1], tp_d, gpus_per_node)),
            -c[1],
        ),
    )
    return Deployment(PoolSize(p, tp_p), PoolSize(d, tp_d))
