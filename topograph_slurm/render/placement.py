"""What ``explain`` prints (text and JSON) and the node orders ``order`` writes, as template
contexts; the syntax of each launcher's hostfile lives in ``templates/order.*.j2``."""

from __future__ import annotations

import json
from typing import Any

import jinja2

from topograph_slurm.analysis.placement.explain import Explanation
from topograph_slurm.model.gpu import RankBinding
from topograph_slurm.model.placement import EDP, EP, ETP, LEVEL_DOMAIN, LEVEL_NODE
from topograph_slurm.render.environment import printable, render

#: ``order --format``: the template of each node-order format.
ORDER_FORMATS = {
    "plain": "order.plain.j2",
    "slurm-hostfile": "order.slurm-hostfile.j2",
    "torchrun": "order.torchrun.j2",
    "mpi": "order.mpi.j2",
    "binding-env": "order.binding-env.j2",
    "binding-wrapper": "order.binding-wrapper.j2",
    "binding-srun": "order.binding-srun.j2",
}
#: The formats that print each local rank's GPU, NIC(s) and CPUs instead of the node order.
BINDING_FORMATS = frozenset(name for name in ORDER_FORMATS if name.startswith("binding-"))
_LEVEL_WORDS = {LEVEL_NODE: "one node", LEVEL_DOMAIN: "one NVLink domain/block"}


#: How each kind is named in text: the expert grid's own kinds in words.
KIND_NAMES = {ETP: "expert TP", EDP: "expert DP"}


def explanation_data(result: Explanation, ranks_from: str = "") -> dict[str, Any]:
    """The explanation as plain data: the JSON report, and the text template's context."""
    layout = result.layout
    experts = [ETP, EP, EDP] if layout.has_experts else []
    return {
        "layout": {kind: layout.size(kind) for kind in (*layout.order, *experts)}
        | {"order": "-".join(layout.order)},
        "dense": [kind for kind in layout.order if kind != EP],
        "experts": experts,
        "ranks_from": ranks_from,
        "gpus_per_node": result.gpus_per_node,
        "nodes": result.nodes,
        "levels": result.levels,
        "tp_home": result.tp_home,
        "tp_inside": result.tp_inside,
        "verdict": result.verdict,
        "kinds": {
            kind: {
                "size": report.spans.size,
                "groups": report.spans.groups,
                "span": report.spans.by_level,
                "crossing": {
                    level: report.spans.crossing(level, result.levels)
                    for level in result.levels[:-1]
                },
                "worst_level": report.spans.worst_level,
                "worst_nodes": report.spans.worst_nodes,
                "worst_link": report.worst_link,
                "troubles": [
                    {"kind": f.kind, "subject": f.subject, "message": f.message}
                    for f in report.troubles
                ],
            }
            for kind, report in result.kinds.items()
        },
    }


def render_explanation(
    env: jinja2.Environment, result: Explanation, fmt: str, ranks_from: str = ""
) -> str:
    data = explanation_data(result, ranks_from)
    if fmt == "json":  # docs/explain-order.md: topograph-slurm-explain version 1
        data = {"format": "topograph-slurm-explain", "version": 1, **data}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    return render(
        env.overlay(finalize=printable),
        "explain.txt.j2",
        words=_LEVEL_WORDS,
        kind_names=KIND_NAMES,
        **data,
    )


def render_order(
    env: jinja2.Environment,
    fmt: str,
    nodes: list[str],
    gpus_per_node: int,
    binding: tuple[RankBinding, ...] = (),
) -> str:
    """The node order, or (a binding format) each local rank's *binding* on *nodes*."""
    context = {"nodes": nodes, "gpus_per_node": gpus_per_node, "binding": binding}
    return render(env, ORDER_FORMATS[fmt], **context)


def render_order_json(
    nodes: list[str],
    gpus_per_node: int,
    result: Explanation,
    binding: tuple[RankBinding, ...] = (),
) -> str:
    """``order --json``: the order, whether it keeps TP inside, and (binding formats) each
    local rank's GPU, NICs and CPUs (docs/json.md, ``topograph-slurm-order`` version 1)."""
    data = {
        "format": "topograph-slurm-order",
        "version": 1,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "tp_inside": result.tp_inside,
        "verdict": result.verdict,
        "binding": [
            {"local_rank": b.local_rank, "gpu": b.gpu, "nics": list(b.nics), "cpus": list(b.cpus)}
            for b in binding
        ],
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
