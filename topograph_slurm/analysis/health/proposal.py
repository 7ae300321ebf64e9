"""What to change in Slurm so that each node carries its verdict: Weight, features, drain.

Measured on Slurm 24.11 and 26.05 (tests/integration/test_health_apply.py): Weight and
features set with ``scontrol update`` fall back to slurm.conf on ``scontrol reconfigure`` and
on a slurmctld restart, together; a drain (state and reason) survives both. So the state to
compare with is always Slurm's own, read fresh each run, and nothing of ours is kept elsewhere:

- **Weight**: a degraded or drain-worthy node gets ``weight`` added to its own. Our health
  feature (``<prefix>degraded``/``<prefix>drain``) marks that the offset is in effect, and
  both vanish together on a reconfigure, so the node's own weight is its current one without
  the mark and the current one minus the offset with it. No state file can disagree with
  slurmctld.
- **Features**: ours start with the prefix and are replaced; every other feature (an admin's)
  stays, in its order. Active features follow the same rule. The prefix's ``pool_`` features
  are ``pools --apply``'s (:data:`POOL_FEATURES`), which follows the same rule for its own;
  the prefix's ``keep`` is ``occupancy --apply``'s (:data:`KEEP_FEATURE`), the mark of its own
  Weight offset, which health's offset adds to (analysis/occupancy/steer.py).
- **Drain**: ours carry :data:`REASON_PREFIX`; only those are resumed when the node is healthy
  again, and a drain by anyone else is left alone. Right after a slurmctld restart a node is
  ``UNKNOWN`` until its slurmd registers, and Slurm refuses to resume it then ("Invalid node
  state specified"), so that resume waits for a later run.

A node gets a change only where Slurm's value differs, so a second run with nothing new
proposes nothing (an unchanged ``scontrol update`` is never re-run). Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from topograph_slurm.model.health import (
    DEGRADED,
    DRAIN,
    HEALTHY,
    UNKNOWN,
    HealthPlan,
    NodeChange,
    NodeLabels,
    SlurmNode,
    Verdict,
)
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Finding

#: Every drain reason ``health`` sets starts with this; only those drains are ever resumed.
REASON_PREFIX = "topograph:"
#: The features under the prefix that ``pools --apply`` sets (``<prefix>pool_<role>``): not
#: health's, so health leaves them as they are (and pools leaves health's).
POOL_FEATURES = "pool_"
#: The feature under the prefix that ``occupancy --apply`` sets on the nodes of a whole free
#: unit (its Weight offset is in effect): not health's either.
KEEP_FEATURE = "keep"
#: Health class feature (after the prefix) of each verdict.
CLASS = {HEALTHY: "ok", DEGRADED: "degraded", DRAIN: "drain"}
_PENALISED = (DEGRADED, DRAIN)


#: The largest node Weight slurmctld takes (issue 14: above it every update is refused).
MAX_WEIGHT = 0xFFFFFFF0


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """How verdicts become Slurm values: our feature prefix, the weight added to a degraded
    node, and whether drain-worthy nodes are drained (else only weighted)."""

    prefix: str = "topo_"
    weight: int = 1000
    drain: bool = True

    def features(self, verdict: Verdict, labels: NodeLabels) -> tuple[str, ...]:
        """Our features for a node: health class, then leaf and block when placed."""
        ours = [self.prefix + CLASS[verdict.severity]]
        if labels.leaf:
            ours.append(f"{self.prefix}leaf_{labels.leaf}")
        if labels.block:
            ours.append(f"{self.prefix}block_{labels.block}")
        return tuple(ours)

    def owns(self, feature: str) -> bool:
        """A feature health sets: the prefix's, but not the pools' nor occupancy's."""
        return feature.startswith(self.prefix) and not (
            feature.startswith(self.prefix + POOL_FEATURES) or feature == self.prefix + KEEP_FEATURE
        )

    def marked(self, node: SlurmNode) -> bool:
        """Our weight offset is in effect: the node carries our degraded or drain class."""
        return not self._marks.isdisjoint(node.features)

    @property
    def _marks(self) -> frozenset[str]:
        return frozenset(self.prefix + CLASS[level] for level in _PENALISED)


def plan(
    verdicts: Mapping[str, Verdict],
    labels: Mapping[str, NodeLabels],
    current: Iterable[SlurmNode],
    policy: HealthPolicy,
    not_per_node: list[tuple[Finding, str]] | None = None,
) -> HealthPlan:
    """One :class:`NodeChange` per Slurm node (empty where nothing differs), in name order."""
    slurm = sorted(current, key=lambda node: natural_key(node.name))
    changes = [
        _change(
            node,
            verdicts.get(node.name) or Verdict(node.name, UNKNOWN),
            labels.get(node.name, NodeLabels()),
            policy,
        )
        for node in slurm
    ]
    listed = {node.name for node in slurm}
    missing = [verdicts[name] for name in sorted(verdicts.keys() - listed, key=natural_key)]
    return HealthPlan(changes, missing, list(not_per_node or []))


def _change(
    node: SlurmNode, verdict: Verdict, labels: NodeLabels, policy: HealthPolicy
) -> NodeChange:
    if verdict.severity == UNKNOWN:
        why = "not judged (see its findings)" if verdict.findings else "not in the fabric sweep"
        return NodeChange(node.name, verdict, node, note=f"{why}: left as it is")
    own = node.weight - policy.weight if policy.marked(node) else node.weight
    own = own if own >= 1 else node.weight  # an admin set it below our offset: start anew
    weight = min(own + policy.weight, MAX_WEIGHT) if verdict.severity in _PENALISED else own
    features, active = relabel(node, policy.features(verdict, labels), policy.owns)
    drain, resume, note = _drain(node, verdict, policy)
    return NodeChange(
        node.name,
        verdict,
        node,
        weight=weight if weight != node.weight else None,
        features=features,
        active_features=active,
        drain_reason=drain,
        resume=resume,
        note=note,
    )


def relabel(
    node: SlurmNode, ours: tuple[str, ...], owned: Callable[[str], bool]
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The node's available and active features with those *owned* replaced by *ours* (every
    other one, an admin's, kept in its order); (None, None) when Slurm holds them already."""
    features = _with_ours(node.features, ours, owned)
    active = _with_ours(node.active_features, ours, owned)
    if set(features) == set(node.features) and set(active) == set(node.active_features):
        return None, None
    return features, active


def _with_ours(
    features: tuple[str, ...], ours: tuple[str, ...], owned: Callable[[str], bool]
) -> tuple[str, ...]:
    """*features* without those *owned*, in their order, then *ours*."""
    return tuple(f for f in features if not owned(f)) + ours


def drain_reason(verdict: Verdict) -> str:
    """The reason ``sinfo -R`` shows: ours, and the kinds behind it."""
    return f"{REASON_PREFIX} {', '.join(verdict.kinds)}"


def _drain(node: SlurmNode, verdict: Verdict, policy: HealthPolicy) -> tuple[str | None, bool, str]:
    """(drain reason to set, resume?, note): drain a drain-worthy node, resume our own drain
    of a node that no longer is, never touch anyone else's drain."""
    ours = node.drained and node.reason.startswith(REASON_PREFIX)
    if verdict.severity == DRAIN and policy.drain:
        reason = drain_reason(verdict)
        if not node.drained or (ours and node.reason != reason):
            return reason, False, ""
        if not ours:
            return None, False, f"drained by someone else ({node.reason!r}): left drained"
        return None, False, ""
    if ours and "UNKNOWN" in node.state:  # slurmctld restarted, slurmd not registered yet
        return None, False, "not registered since slurmctld started: resumed on a later run"
    return None, ours, ""
