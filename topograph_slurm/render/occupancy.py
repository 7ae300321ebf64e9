"""What ``occupancy`` prints (text, JSON) and its ``--metrics`` file, as template contexts."""

from __future__ import annotations

import json
from typing import Any

import jinja2

from topograph_slurm.model.occupancy import Occupancy, OccupancyReport
from topograph_slurm.render.environment import printable, render

#: The GPU columns of every unit and total, in the order they print.
COLUMNS = ("gpus", "busy", "free", "down")


def occupancy_data(report: OccupancyReport) -> dict[str, Any]:
    """The report as plain data: ``occupancy --json`` and the templates' context."""
    return {
        "fabric": _occupancy(report.fabric),
        "partitions": {name: _occupancy(part) for name, part in report.partitions.items()},
    }


def _occupancy(occupancy: Occupancy) -> dict[str, Any]:
    return {
        "level": occupancy.level,
        "totals": {column: occupancy.total(column) for column in COLUMNS},
        "stranded": occupancy.stranded,
        "largest_tp": occupancy.largest_tp,
        "pending": occupancy.pending,
        "units": [
            {
                "name": unit.name,
                "nodes": unit.nodes,
                **{column: getattr(unit, column) for column in COLUMNS},
                "largest_tp": unit.largest_tp,
                "stranded": unit.free if unit.stranded else 0,
            }
            for unit in occupancy.units
        ],
        "spread_jobs": [
            {"job_id": job.job_id, "nodes": job.nodes, "held": job.held, "fewest": job.fewest}
            for job in occupancy.spread
        ],
        "unplaced": occupancy.unplaced,
    }


def render_occupancy(
    env: jinja2.Environment,
    report: OccupancyReport,
    fmt: str,
    keep: dict[str, Any] | None = None,
) -> str:
    """The report; with *keep* (``--keep-whole``/``--reset``: ``{"reset": bool, "weight": N,
    "commands": [...]}``) also the ``scontrol update`` lines of the keep offsets."""
    data = occupancy_data(report) | ({"keep": keep} if keep is not None else {})
    if fmt == "json":  # docs/occupancy.md: topograph-slurm-occupancy version 1
        data = {"format": "topograph-slurm-occupancy", "version": 1, **data}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    return render(env.overlay(finalize=printable), "occupancy.txt.j2", **data)


def render_occupancy_metrics(env: jinja2.Environment, report: OccupancyReport) -> str:
    """The Prometheus text exposition of the report (templates/occupancy.prom.j2)."""
    return render(env, "occupancy.prom.j2", **occupancy_data(report))
