"""Health as the scheduler sees it: a node's verdict, what Slurm holds for it now, and the
change that brings the one to the other.

``health`` reads findings into a :class:`Verdict` per node, Slurm's ``scontrol show nodes
--json`` into a :class:`SlurmNode` per node, and proposes a :class:`NodeChange` only where the
two differ; templates render the changes as ``scontrol update`` commands.
"""

from __future__ import annotations

from dataclasses import dataclass

from topograph_slurm.model.result import Finding

#: Verdicts, mildest first. ``unknown``: the node could not be judged (not read, not in the
#: sweep), so nothing about it changes.
HEALTHY, UNKNOWN, DEGRADED, DRAIN = "healthy", "unknown", "degraded", "drain"
SEVERITIES: tuple[str, ...] = (HEALTHY, UNKNOWN, DEGRADED, DRAIN)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One node's verdict and the findings that caused it (none when healthy)."""

    node: str
    severity: str
    findings: tuple[Finding, ...] = ()

    @property
    def kinds(self) -> list[str]:
        """The finding kinds behind the verdict, sorted and once each."""
        return sorted({finding.kind for finding in self.findings})


@dataclass(frozen=True, slots=True)
class NodeLabels:
    """Where a node sits, as scheduling labels: its logical leaf and its block (an IB unit
    or an NVLink domain); empty when the fabric does not place it."""

    leaf: str = ""
    block: str = ""


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """What slurmctld holds for one node now (``scontrol show nodes --json``).

    ``known`` False: Slurm could not be asked (no scontrol here, the nodes came from a
    hostlist), so the values are Slurm's defaults for a node slurm.conf says nothing else
    about (Weight 1, no features, not drained) and the proposals start from those.
    """

    name: str
    weight: int
    features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()
    state: tuple[str, ...] = ()
    reason: str = ""
    known: bool = True

    @property
    def drained(self) -> bool:
        """DRAIN is a flag beside the base state (``["IDLE", "DRAIN"]`` on 24.11 and 26.05)."""
        return "DRAIN" in self.state


@dataclass(frozen=True, slots=True)
class NodeChange:
    """What to change on one node; None (or False) leaves that part as it is.

    ``was`` is the node as Slurm holds it now; ``note`` says why something that looks due is
    left alone (an admin's drain, a node that could not be judged).
    """

    node: str
    verdict: Verdict
    was: SlurmNode
    weight: int | None = None
    features: tuple[str, ...] | None = None
    active_features: tuple[str, ...] | None = None
    drain_reason: str | None = None
    resume: bool = False
    note: str = ""

    @property
    def updates(self) -> bool:
        """Weight or features change (one ``scontrol update`` command)."""
        return self.weight is not None or self.features is not None

    @property
    def changes(self) -> bool:
        return self.updates or self.drain_reason is not None or self.resume


@dataclass(slots=True)
class HealthPlan:
    """Every node's verdict and change, plus what could not be applied and why."""

    changes: list[NodeChange]
    #: nodes judged on the fabric that Slurm does not list: nothing to update there
    not_in_slurm: list[Verdict]
    #: findings that name no Slurm node (islands, a partition's GPU count) and why
    not_per_node: list[tuple[Finding, str]]

    @property
    def pending(self) -> list[NodeChange]:
        return [change for change in self.changes if change.changes]
