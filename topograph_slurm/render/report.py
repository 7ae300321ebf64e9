"""The report: what was placed, what was left out and why, and what looks unhealthy.

One data structure (:func:`report_data`) feeds both renderings, so the text and the JSON can
never disagree: the JSON lists every adapter and finding; the text folds what repeats (an
expected exclusion reason is one line with its count, identical findings of many nodes one
line with their hostlist) from that same data. The text layout is a template like every
other output; every value it prints passes :func:`~.environment.printable`, so control
characters from fabric descriptions reach the terminal as escapes, never as bytes.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2

from topograph_slurm.analysis.fabric.analyse import EXPECTED_REASONS
from topograph_slurm.model import names
from topograph_slurm.model.result import LEVEL_INFO, Analysis, BlockTopology, Drift
from topograph_slurm.render.environment import printable, render

#: ``generate --json``'s report: its format and version (docs/generate.md has the schema).
REPORT_FORMAT = "topograph-slurm-report"
REPORT_VERSION = 1


def report_data(
    analysis: Analysis, blocks: BlockTopology | None = None, changes: Drift | None = None
) -> dict[str, Any]:
    """Plain data for the report (JSON-ready); ``since_last_run`` is the drift from the last
    run's kept summary (None when the run keeps none: no ``-o FILE``)."""
    from topograph_slurm.render.diff import drift_data

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
        "expected_reasons": sorted(EXPECTED_REASONS),
        "missing": analysis.missing_nodes,
        "unnamed": [dataclasses.asdict(node) for node in analysis.unnamed],
        "findings": [dataclasses.asdict(finding) for finding in findings],
        "notes": [dataclasses.asdict(note) for note in fabric.notes],
        "since_last_run": drift_data(changes) if changes is not None else None,
    }


def _expected(exclusions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One line per expected reason: how many adapters, on how many switches."""
    counts: Counter[str] = Counter()
    leaves: dict[str, set[str]] = {}
    for ex in exclusions:
        counts[ex["reason"]] += 1
        leaves.setdefault(ex["reason"], set()).add(ex["leaf"])
    return [
        {"reason": reason, "count": counts[reason], "switches": len(leaves[reason] - {""})}
        for reason in sorted(counts)
    ]


def _folded(findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Findings with the same kind and message folded into one, subjects as a hostlist (in
    first-appearance order of the kind and message)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for finding in findings:
        groups.setdefault((finding["kind"], finding["message"]), []).append(finding["subject"])
    return [
        {"kind": kind, "subject": names.fold(subjects), "count": len(subjects), "message": message}
        for (kind, message), subjects in groups.items()
    ]


def _unnamed_lines(unnamed: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each unnamed node with its HCAs' positions folded by port (``port 7 of 8 leaves
    leaf-su001-r[0-7]``)."""
    out = []
    for node in unnamed:
        ports: dict[int, list[str]] = {}
        for hca in node["hcas"]:
            ports.setdefault(hca["port"], []).append(hca["leaf"])
        where = "; ".join(
            f"port {port} of {len(leaves)} leaves {names.fold(leaves)}"
            if len(leaves) > 1
            else f"port {port} of {leaves[0]}"
            for port, leaves in sorted(ports.items())
        )
        out.append({**node, "where": where})
    return out


def text_view(data: Mapping[str, Any]) -> dict[str, Any]:
    """The text report's context: *data* plus the folded forms of what repeats."""
    exclusions = data["exclusions"]
    expected = set(data["expected_reasons"])
    findings = data["findings"]
    return {
        **data,
        "listed": [ex for ex in exclusions if ex["reason"] not in expected],
        "expected": _expected(ex for ex in exclusions if ex["reason"] in expected),
        "problems": _folded(f for f in findings if f["level"] != LEVEL_INFO),
        "problem_count": sum(f["level"] != LEVEL_INFO for f in findings),
        "information": _folded(f for f in findings if f["level"] == LEVEL_INFO),
        "unnamed": _unnamed_lines(data["unnamed"]),
    }


def render_report(
    env: jinja2.Environment,
    analysis: Analysis,
    blocks: BlockTopology | None,
    fmt: str,
    changes: Drift | None = None,
) -> str:
    """The report as ``text`` or ``json``. The text goes through an environment whose
    ``finalize`` escapes every printed value, so no template (built-in or a site's) can
    forget to."""
    data = report_data(analysis, blocks, changes)
    if fmt == "json":
        versioned = {"format": REPORT_FORMAT, "version": REPORT_VERSION, **data}
        return json.dumps(versioned, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "report.txt.j2", **text_view(data))
