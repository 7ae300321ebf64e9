"""What ``experts`` prints: EPLB's three arrays per layer as JSON (what an engine loads),
and as text the balance and cross-domain estimate per layer, each GPU's experts per layer
only when asked (thousands of GPUs make it megabytes)."""

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
    fmt: str = "json",
    per_gpu_text: bool = False,
) -> dict[str, Any]:
    """The plan as plain data: the JSON output (*fmt* ``json``: EPLB's arrays and each GPU's
    experts), or the text template's context (the estimates; each GPU's experts when
    *per_gpu_text*). Only what the output shows is built."""
    layout = plan.layout
    per_gpu = layout.slots_per_gpu
    arrays, by_gpu = fmt == "json", fmt == "json" or per_gpu_text
    width = plan.width
    return {
        "policy": plan.policy,
        "why_global": plan.why_global,
        "experts": len(plan.layers[0].replica_counts) if plan.layers else 0,
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
                "before": _estimate(before),
                "after": _estimate(after),
            }
            | (
                {
                    "physical_to_logical": layer.physical_to_logical,
                    "logical_to_physical": layer.logical_to_physical(width),
                    "replica_counts": layer.replica_counts,
                }
                if arrays
                else {}
            )
            | (
                {
                    "gpu_experts": [
                        layer.physical_to_logical[g * per_gpu : (g + 1) * per_gpu]
                        for g in range(layout.gpus)
                    ]
                }
                if by_gpu
                else {}
            )
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
    if fmt == "json":  # docs/moe.md: topograph-slurm-experts version 1
        data = {"format": "topograph-slurm-experts", "version": 1, **data}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "experts.txt.j2", **data)
