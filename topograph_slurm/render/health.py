"""What ``health`` prints: the per-node verdict table (text or JSON) and the ``scontrol``
command lines; their syntax lives in ``templates/health.txt.j2`` and
``templates/health.commands.j2``."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import jinja2

from topograph_slurm.model.health import SEVERITIES, HealthPlan, NodeChange, SlurmNode
from topograph_slurm.model.names import fold
from topograph_slurm.model.result import Finding
from topograph_slurm.render.environment import render


def _grouped(changes: list[NodeChange]) -> dict[str, list[dict[str, Any]]]:
    """Nodes that get the very same change share one command (a hostlist), so a first run on
    16,384 nodes is a command per leaf and class, not one per node: updates, then drains, then
    resumes, each in the order of its first node."""
    updates: dict[tuple[Any, ...], list[str]] = {}
    drains: dict[str, list[str]] = {}
    resumes: list[str] = []
    for c in changes:
        if c.updates:
            updates.setdefault((c.weight, c.features, c.active_features), []).append(c.node)
        if c.drain_reason is not None:
            drains.setdefault(c.drain_reason, []).append(c.node)
        if c.resume:
            resumes.append(c.node)
    return {
        "updates": [
            {"nodes": nodes, "weight": w, "features": f, "active_features": a}
            for (w, f, a), nodes in updates.items()
        ],
        "drains": [{"nodes": nodes, "reason": reason} for reason, nodes in drains.items()],
        "resumes": [{"nodes": resumes}] if resumes else [],
    }


def render_commands(env: jinja2.Environment, plan: HealthPlan) -> list[str]:
    """The ``scontrol update`` command lines of every pending change."""
    text = render(env, "health.commands.j2", **_grouped(plan.pending))
    return [line for line in text.splitlines() if line.strip()]


def _finding(finding: Finding) -> dict[str, Any]:
    return {"kind": finding.kind, "subject": finding.subject, "message": finding.message}


def _action(change: NodeChange) -> str:
    if change.drain_reason is not None:
        return "drain"
    return "resume" if change.resume else "-"


def _node(change: NodeChange) -> dict[str, Any]:
    """One node's row; Slurm's current values are None where it could not be asked."""
    was = change.was
    return {
        "node": change.node,
        "verdict": change.verdict.severity,
        "findings": [_finding(f) for f in change.verdict.findings],
        "known": was.known,
        "weight": {"now": was.weight if was.known else None, "new": change.weight},
        "features": {"now": _known(was, was.features), "new": _listed(change.features)},
        "active_features": {
            "now": _known(was, was.active_features),
            "new": _listed(change.active_features),
        },
        "state": {"now": _known(was, was.state), "reason": was.reason if was.known else None},
        "action": _action(change),
        "drain_reason": change.drain_reason,
        "changes": change.changes,
        "note": change.note,
    }


def _known(node: SlurmNode, value: tuple[str, ...]) -> list[str] | None:
    return list(value) if node.known else None


def _listed(value: tuple[str, ...] | None) -> list[str] | None:
    return None if value is None else list(value)


def plan_data(plan: HealthPlan, commands: list[str]) -> dict[str, Any]:
    """The plan as plain data: the JSON output, and the text template's context."""
    counts = Counter(change.verdict.severity for change in plan.changes)
    return {
        "summary": {severity: counts[severity] for severity in SEVERITIES}
        | {"nodes": len(plan.changes), "changing": len(plan.pending)},
        "slurm_asked": all(change.was.known for change in plan.changes),
        "nodes": [_node(change) for change in plan.changes],
        "not_in_slurm": [
            {"node": v.node, "verdict": v.severity, "findings": [_finding(f) for f in v.findings]}
            for v in plan.not_in_slurm
        ],
        "not_per_node": [_finding(f) | {"why": why} for f, why in plan.not_per_node],
        "commands": commands,
    }


def render_plan(env: jinja2.Environment, plan: HealthPlan, commands: list[str], fmt: str) -> str:
    """The verdict table and the commands as text, or everything as JSON."""
    data = plan_data(plan, commands)
    if fmt == "json":  # docs/health.md: topograph-slurm-health version 1
        data = {"format": "topograph-slurm-health", "version": 1, **data}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    relabelled = [row["node"] for row in data["nodes"] if _relabelled(row)]
    shown = [
        row
        for row in data["nodes"]
        if (row["verdict"] != "healthy" or row["changes"]) and not _relabelled(row)
    ]
    return render(
        env,
        "health.txt.j2",
        shown=shown,
        relabelled=fold(relabelled),
        count=len(relabelled),
        **data,
    )


def _relabelled(row: dict[str, Any]) -> bool:
    """A healthy node whose one change is its topology labels (a first run gives every node
    its leaf and block feature): summarised in one line, not a row each (33k lines at 16k
    nodes); its command and its row in ``--json`` stay."""
    return (
        row["verdict"] == "healthy"
        and row["weight"]["new"] is None
        and row["action"] == "-"
        and not row["note"]
        and row["features"]["new"] is not None
    )


def render_health_metrics(env: jinja2.Environment, plan: HealthPlan, commands: list[str]) -> str:
    """The verdict counts as Prometheus text (templates/health.prom.j2), for ``--metrics``."""
    return render(env, "health.prom.j2", severities=SEVERITIES, **plan_data(plan, commands))
