"""What ``experts`` prints: EPLB's three arrays per layer as JSON (what an engine loads),
and as text each GPU's experts per layer with the balance and cross-domain estimate."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import jinja2

from topograph_slurm.model.experts import ExpertPlan, Gpu, LayerEstimate
from topograph_slurm.render.environment import printable, render


def experts_data(
    plan: ExpertPlan,
    gpus: list[Gpu],
    domain_kind: str,
    loads_from: str,
    ranks_from: str,
) -> dict[str, Any]:
    """The plan as plain data: the JSON output, and the text template's context."""
    layout = plan.layout
    per_gpu = layout.slots_per_gpu
    return {
        "policy": plan.policy,
        "why_global": plan.why_global,
        "domain_kind": domain_kind,
        "loads_from": loads_from,
        "ranks_from": ranks_from,
        "layout": {
            "replicas": layout.replicas,
            "groups": layout.groups,
            "gpus": layout.gpus,
            "domains": layout.domains,
            "slots_per_gpu": per_gpu,
        },
        "gpus": [asdict(gpu) for gpu in gpus],
        "layers": [
            {
                "physical_to_logical": layer.physical_to_logical,
                "logical_to_physical": layer.logical_to_physical,
                "replica_counts": layer.replica_counts,
                "gpu_experts": [
                    layer.physical_to_logical[g * per_gpu : (g + 1) * per_gpu]
                    for g in range(layout.gpus)
                ],
                "before": _estimate(before),
                "after": _estimate(after),
            }
            for layer, before, after in zip(plan.layers, plan.before, plan.after, strict=True)
        ],
    }


def _estimate(estimate: LayerEstimate) -> dict[str, Any]:
    return {
        "balance": round(estimate.balance, 4),
        "cross_domain": round(estimate.cross_domain, 4),
        "split_groups": estimate.split_groups,
    }


def render_experts(env: jinja2.Environment, data: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "experts.txt.j2", **data)
