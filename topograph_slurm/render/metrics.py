"""The run's metrics for node_exporter's textfile collector: what ``--metrics FILE`` writes.

A cron or timer run is invisible until it goes wrong for a week; these gauges let alerting see
every run: did it succeed and when did it last, how many nodes it placed, how many adapters it
left out, which findings it made, whether it wrote and reconfigured. The text format itself
lives in ``templates/metrics.prom.j2``; this module only builds the values it shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import jinja2

from topograph_slurm.model.result import Analysis
from topograph_slurm.render.environment import render

TEMPLATE = "metrics.prom.j2"


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one successful run produced. ``kept_missing`` counts nodes absent from today's
    sweep that kept their place (``--keep-missing``; 0 until that exists); ``changes`` is the
    number of changes since the last run, None when nobody measured them (not rendered)."""

    placed: int
    excluded: int
    findings: dict[tuple[str, str], int] = field(default_factory=dict)
    written: bool = False
    reconfigured: bool = False
    kept_missing: int = 0
    changes: int | None = None


def outcome_of(
    analysis: Analysis | None,
    placed: int,
    written: bool,
    reconfigured: bool,
    *,
    kept_missing: int = 0,
    changes: int | None = None,
) -> RunOutcome:
    """The counts of a finished run: findings by kind and level, sorted so output is stable.
    *kept_missing* and *changes* come from the kept fabric summary of the previous run when
    there is one (``--keep-missing``, ``diff``); without it they are 0 and not measured."""
    findings = Counter(
        (finding.kind, finding.level) for finding in (analysis.findings if analysis else [])
    )
    return RunOutcome(
        placed=placed,
        excluded=len(analysis.exclusions) if analysis else 0,
        findings=dict(sorted(findings.items())),
        written=written,
        reconfigured=reconfigured,
        kept_missing=kept_missing,
        changes=changes,
    )


def render_metrics(
    env: jinja2.Environment,
    *,
    finished: float,
    duration: float,
    outcome: RunOutcome | None,
    last_success: float | None,
    deferred: float | None = None,
) -> str:
    """The .prom text of a run; *outcome* None for a failed run (then only success 0, its
    duration and time, and the last success carried over from the previous file); *deferred*
    how long --reconfigure waited for jobs in their prolog, when it looked (either way)."""
    return render(
        env,
        TEMPLATE,
        success=outcome is not None,
        finished=finished,
        duration=duration,
        last_success=finished if outcome is not None else last_success,
        outcome=outcome,
        deferred=deferred,
    )
