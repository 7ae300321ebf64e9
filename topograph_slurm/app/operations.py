"""One unattended ``generate`` run as operations sees it: the flags that only make sense
together, and the metrics a run leaves behind whether it succeeds or fails.

The CLI calls :func:`record_success` last, after every write and any reconfigure took, so
state is recorded only after success; :func:`failure_metrics` wraps the run so a failure still
says so to alerting (``topograph_slurm_success 0``, the last success time kept).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topograph_slurm.config import Settings
from topograph_slurm.errors import OutputError, TopographError, UsageError
from topograph_slurm.model.findings import FindingKind

if TYPE_CHECKING:
    import jinja2

    from topograph_slurm.app.fabric import Generated
    from topograph_slurm.render.metrics import RunOutcome


@dataclass(slots=True)
class Run:
    """When the run started and what it did to the topology file and slurmctld."""

    started: float = field(default_factory=time.monotonic)
    written: bool = False
    reconfigured: bool = False

    @property
    def duration(self) -> float:
        return time.monotonic() - self.started


def check_flags(settings: Settings, check: bool, given: Mapping[str, Any]) -> Settings:
    """*settings* for this run: --reconfigure applies a written -o file; --check writes nothing,
    so --reconfigure and --metrics on its command line are usage errors, and from the config
    (a cron job's, reused for a check) they are left out."""
    if check and (given.get("reconfigure") or given.get("metrics")):
        raise UsageError("--check writes nothing: drop --reconfigure and --metrics")
    if check:
        return replace(settings, reconfigure=False, metrics=None)
    if settings.reconfigure and settings.output is None:
        raise UsageError("--reconfigure needs -o PATH: slurmctld reads a file")
    return settings


def _write_metrics(
    settings: Settings, env: jinja2.Environment, run: Run, outcome: RunOutcome | None
) -> None:
    from topograph_slurm.output import write_file
    from topograph_slurm.render.metrics import render_metrics
    from topograph_slurm.sources.metrics import load_last_success

    assert settings.metrics is not None
    path = Path(settings.metrics)
    text = render_metrics(
        env,
        finished=time.time(),
        duration=run.duration,
        outcome=outcome,
        last_success=None if outcome else load_last_success(path),
    )
    write_file(path, text)


@contextlib.contextmanager
def failure_metrics(settings: Settings, env: jinja2.Environment, run: Run) -> Iterator[None]:
    """On an expected failure, metrics that say so (when asked for), then the failure itself;
    metrics that cannot be written then do not hide the failure that matters."""
    try:
        yield
    except TopographError:
        if settings.metrics:
            with contextlib.suppress(OutputError):
                _write_metrics(settings, env, run, None)
        raise


def record_success(
    settings: Settings, env: jinja2.Environment, result: Generated, run: Run
) -> None:
    """What a successful run leaves for the next one and for alerting: its metrics."""
    if not settings.metrics:
        return
    from topograph_slurm.render.metrics import outcome_of

    tracked = result.tracked
    outcome = outcome_of(
        result.analysis,
        result.node_count,
        run.written,
        run.reconfigured,
        kept_missing=(
            sum(f.kind == FindingKind.KEPT_MISSING for f in tracked.findings) if tracked else 0
        ),
        # the first run (no summary kept yet) has nothing to compare with: not measured
        changes=len(tracked.changes.changes) if tracked and tracked.changes.old else None,
    )
    _write_metrics(settings, env, run, outcome)
