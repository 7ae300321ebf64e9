"""The report: what was placed, what was left out and why, and what looks unhealthy.

One data structure (:func:`report_data`) feeds both renderings, so the text and the JSON can
never disagree. The text layout is a template like every other output.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jinja2

from topograph_slurm.model.result import Analysis, BlockTopology
from topograph_slurm.render.environment import render


def report_data(analysis: Analysis, blocks: BlockTopology | None = None) -> dict[str, Any]:
    """Plain data for the report (JSON-ready)."""
    fabric = analysis.fabric
    findings = list(analysis.findings) + (blocks.findings if blocks else [])
    return {
        "switches": len(fabric.switches),
        "cas": len(fabric.cas),
        "links": len(fabric.links),
        "nodes": analysis.node_count,
        "node_hcas": len({hca for rails in analysis.hosts.rails.values() for hca, _ in rails}),
        "leaves": [dataclasses.asdict(leaf) for leaf in analysis.tree.leaves],
        "uppers": [dataclasses.asdict(switch) for switch in analysis.tree.uppers],
        "tops": analysis.tree.tops,
        "blocks": [dataclasses.asdict(block) for block in blocks.blocks] if blocks else [],
        "block_sizes": blocks.block_sizes if blocks else [],
        "block_nodes": len({node for block in blocks.blocks for node in block.nodes})
        if blocks
        else 0,
        "exclusions": [dataclasses.asdict(ex) for ex in analysis.exclusions],
        "missing": analysis.missing_nodes,
        "findings": [dataclasses.asdict(finding) for finding in findings],
        "notes": [dataclasses.asdict(note) for note in fabric.notes],
    }


def render_report(
    env: jinja2.Environment, analysis: Analysis, blocks: BlockTopology | None, fmt: str
) -> str:
    """The report as ``text`` or ``json``."""
    data = report_data(analysis, blocks)
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    return render(env, "report.txt.j2", **data)
