"""``health``'s use case: the analysed fabric's findings (and a bench record's) judged per
node, compared with what Slurm holds now, and the changes put into Slurm on ``--apply``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from topograph_slurm.analysis.health.proposal import HealthPolicy, plan
from topograph_slurm.analysis.health.verdict import judge, node_labels
from topograph_slurm.app.fabric import Warn, read_fabric
from topograph_slurm.config import ALL, AUTO, Settings
from topograph_slurm.model import names
from topograph_slurm.model.health import HealthPlan, SlurmNode
from topograph_slurm.model.result import Finding
from topograph_slurm.slurm.scontrol import NotInstalled, Scontrol


def health_plan(
    settings: Settings,
    warn: Warn,
    bench: str | None = None,
    *,
    dry_run: bool = True,
    job_records: bool = False,
) -> HealthPlan:
    """Judge every node of the fabric (with the findings of a ``bench`` record: *bench*, else
    the snapshot's own; with *job_records*, those of the job records' node-end parts written
    within ``job_records_since``), and compare with what Slurm holds now (``scontrol show nodes
    --json``; see :func:`current_nodes` for a dry run where it cannot be asked)."""
    from topograph_slurm.sources.snapshot import load_bench

    fabric = read_fabric(settings, warn)
    findings = fabric.findings
    judged = set(fabric.analysis.hosts.rails)
    snapshot = fabric.inputs.snapshot
    if snapshot is not None:
        judged |= snapshot.nodes.keys()
    record = load_bench(bench) if bench else snapshot and snapshot.bench
    if record:  # `bench --record`: slow nodes, slow links, drifted levels
        findings += record.findings
    if job_records:
        findings += _job_record_findings(settings, warn)
    verdicts, unused = judge(findings, judged)
    policy = HealthPolicy(
        settings.health_feature_prefix, settings.health_weight, settings.health_drain
    )
    labels = node_labels(fabric.analysis, fabric.blocks)
    return plan(verdicts, labels, current_nodes(settings, dry_run), policy, unused)


def _job_record_findings(settings: Settings, warn: Warn) -> list[Finding]:
    """The node-end parts' findings (links that degraded under load); an unreadable part is
    a warning, not the end of the run."""
    from topograph_slurm.analysis.state.keep_missing import parse_duration
    from topograph_slurm.app.record_node import job_records

    window = parse_duration(settings.job_records_since).total_seconds()
    found, problems = job_records(settings, window)
    for problem in problems:
        warn(f"job record skipped: {problem}")
    return found


def current_nodes(settings: Settings, dry_run: bool) -> list[SlurmNode]:
    """What Slurm holds for each node now. Without scontrol on this host, a dry run whose
    ``--slurm-nodes`` is a hostlist still proposes: each listed node with Slurm's defaults,
    marked unknown (a laptop or CI runner previewing a fabric dump); ``--apply`` and every
    other node list need Slurm itself."""
    from topograph_slurm.slurm.nodes import scontrol_node_states

    scontrol = Scontrol.from_settings(settings)
    try:
        return scontrol_node_states(scontrol)
    except NotInstalled:
        listed = _hostlist(settings.slurm_nodes)
        if not dry_run:
            raise NotInstalled(
                f"{scontrol.binary} not found: health --apply needs slurm-client"
            ) from None
        if listed is None:
            raise
        return [SlurmNode(name, 1, known=False) for name in listed]


def _hostlist(value: str | None) -> list[str] | None:
    """The nodes a ``--slurm-nodes`` hostlist names; None for auto, all and scontrol."""
    if value in (None, AUTO, ALL, "scontrol"):
        return None
    return names.expand(value)


def apply(settings: Settings, commands: Sequence[str], done: Callable[[str], None]) -> None:
    """Run the plan's ``scontrol update`` lines (only those) through the configured scontrol."""
    from topograph_slurm.slurm.apply import apply_commands

    apply_commands(commands, Scontrol.from_settings(settings), done=done)
