"""A drift as ``diff`` prints it and as the report's "Changes since the last run" shows it.

One data structure (:func:`drift_data`) feeds the JSON and the text; the text lines are one
template (``changes.txt.j2``) that ``diff.txt.j2`` and ``report.txt.j2`` both include, so the
command and the report can never word a change differently. Every printed value passes
:func:`~.environment.printable` (node and switch names come from the fabric).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jinja2

from topograph_slurm.model.result import Drift
from topograph_slurm.render.environment import printable, render

#: ``diff --json``'s format and version (docs/generate.md, "diff").
DIFF_FORMAT = "topograph-slurm-diff"
DIFF_VERSION = 1


def drift_data(drift: Drift) -> dict[str, Any]:
    """Plain data (JSON-ready): both inputs, whether anything changed, each change, and each
    comparison the inputs could not support."""
    return {
        "old": drift.old,
        "new": drift.new,
        "changed": drift.changed,
        "changes": [dataclasses.asdict(change) for change in drift.changes],
        "not_compared": drift.not_compared,
        "bench_levels": [dataclasses.asdict(level) for level in drift.bench_levels],
    }


def render_drift(env: jinja2.Environment, drift: Drift, fmt: str) -> str:
    """``diff``'s output as ``text`` or ``json``."""
    data = drift_data(drift)
    if fmt == "json":
        versioned = {"format": DIFF_FORMAT, "version": DIFF_VERSION, **data}
        return json.dumps(versioned, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "diff.txt.j2", **data)
