"""The TaskProlog's lines for the node side of the job record: ``export NAME=value`` lines
Slurm puts into the task's environment (templates/record.binding.exports.j2)."""

from __future__ import annotations

import jinja2

from topograph_slurm.render.environment import render


def binding_exports(env: jinja2.Environment, status: str) -> str:
    """``export TOPOGRAPH_BINDING=<status>`` for one task."""
    return render(env, "record.binding.exports.j2", status=status)
