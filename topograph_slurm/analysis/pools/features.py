"""``pools --apply``: each node of a pool gets the feature of its role
(``<prefix>pool_prefill`` / ``<prefix>pool_decode``), so a partition or ``--constraint`` can
ask for it: topology as a scheduling label.

Health's rules (``analysis/health/proposal.relabel``): only our own features are replaced,
every other one (an admin's, health's) stays in its order; a node gets a change only where
Slurm's features differ, so a second run changes nothing; a node that left the pools loses
its pool feature. Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Iterable

from topograph_slurm.analysis.health.proposal import POOL_FEATURES, relabel
from topograph_slurm.model.health import UNKNOWN, NodeChange, SlurmNode, Verdict
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.pools import PoolPlan


def pool_feature(prefix: str, role: str) -> str:
    return f"{prefix}{POOL_FEATURES}{role}"


def feature_changes(plan: PoolPlan, current: Iterable[SlurmNode], prefix: str) -> list[NodeChange]:
    """One change per Slurm node, in name order (empty where Slurm holds its pool feature);
    pools judge no health, so every verdict is unknown."""
    role_of = {node: one.role for one in plan.instances for node in one.nodes}
    owned = prefix + POOL_FEATURES
    changes = []
    for node in sorted(current, key=lambda slurm: natural_key(slurm.name)):
        role = role_of.get(node.name)
        ours = (pool_feature(prefix, role),) if role else ()
        features, active = relabel(node, ours, lambda feature: feature.startswith(owned))
        verdict = Verdict(node.name, UNKNOWN)
        changes.append(
            NodeChange(node.name, verdict, node, features=features, active_features=active)
        )
    return changes
