"""The files engines load an expert placement from, made from ``experts``' plan data
(render.experts.experts_data): each holds exactly what its loader reads, nothing else.

- ``sglang``: ``--init-expert-location FILE.json``: ``{"physical_to_logical_map": ...}``
  (SGLang's ``compute_initial_expert_location_metadata`` passes every key of the file to
  ``ExpertLocationMetadata.init_by_mapping`` as a keyword, so another key is a TypeError).
- ``eplb``: DeepSeek EPLB's three return values, ``phy2log``, ``log2phy`` (padded with -1),
  ``logcnt``.
- ``trtllm``: TensorRT-LLM's ``MoeLoadBalancerConfig`` as YAML (``num_slots``,
  ``initial_global_assignments`` keyed by the model's layer index, ``layer_updates_per_iter``),
  the file its wide-EP example's ``generate_eplb_config.py`` writes.
- ``sglang-topology``: ``--eplb-topology FILE.json``: ``{"rank_cost_matrix": ...}`` (SGLang's
  ``load_rank_cost_matrix``), made by analysis.placement.rank_cost.
"""

from __future__ import annotations

import json
from typing import Any

import jinja2

from topograph_slurm.render.environment import render

#: ``experts --format`` values that are an engine's file, not the report.
ENGINE_FORMATS = ("sglang", "sglang-topology", "eplb", "trtllm")


def render_engine_file(
    env: jinja2.Environment,
    data: dict[str, Any],
    fmt: str,
    first_layer: int,
    rank_costs: list[list[int]] | None = None,
) -> str:
    """The *fmt* engine file for the plan *data*; *first_layer* is the model layer index of
    the load file's first row (TensorRT-LLM keys its assignments by model layer)."""
    layers = data["layers"]
    if fmt == "sglang-topology":
        return json.dumps({"rank_cost_matrix": rank_costs}) + "\n"
    if fmt == "sglang":
        body: dict[str, Any] = {
            "physical_to_logical_map": [layer["physical_to_logical"] for layer in layers]
        }
        return json.dumps(body) + "\n"
    if fmt == "eplb":
        body = {
            name: [layer[key] for layer in layers]
            for name, key in (
                ("phy2log", "physical_to_logical"),
                ("log2phy", "logical_to_physical"),
                ("logcnt", "replica_counts"),
            )
        }
        return json.dumps(body) + "\n"
    assignments = {first_layer + i: layer["physical_to_logical"] for i, layer in enumerate(layers)}
    return render(
        env, "experts.trtllm.yaml.j2", num_slots=data["layout"]["replicas"], assignments=assignments
    )
