"""``health``'s use case: the analysed fabric's findings (and a bench record's) judged per
node, compared with what Slurm holds now, and the changes put into Slurm on ``--apply``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from topograph_slurm.analysis.health.proposal import HealthPolicy, plan
from topograph_slurm.analysis.health.verdict import judge, node_labels
from topograph_slurm.app.fabric import Warn, read_fabric
from topograph_slurm.config import Settings
from topograph_slurm.model.health import HealthPlan
from topograph_slurm.slurm.scontrol import Scontrol


def health_plan(settings: Settings, warn: Warn, bench: str | None = None) -> HealthPlan:
    """Judge every node of the fabric (with the findings of a ``bench`` record: *bench*, else
    the snapshot's own), and compare with what Slurm holds now (``scontrol show nodes
    --json``)."""
    from topograph_slurm.slurm.nodes import scontrol_node_states
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
    verdicts, unused = judge(findings, judged)
    policy = HealthPolicy(
        settings.health_feature_prefix, settings.health_weight, settings.health_drain
    )
    labels = node_labels(fabric.analysis, fabric.blocks)
    current = scontrol_node_states(Scontrol.from_settings(settings))
    return plan(verdicts, labels, current, policy, unused)


def apply(settings: Settings, commands: Sequence[str], done: Callable[[str], None]) -> None:
    """Run the plan's ``scontrol update`` lines (only those) through the configured scontrol."""
    from topograph_slurm.slurm.apply import apply_commands

    apply_commands(commands, Scontrol.from_settings(settings), done=done)
