"""The topology slurmctld runs, from ``scontrol show topology [name]``, whose ``Key=Value``
lines the one topology-file reader (:mod:`topograph_slurm.sources.layout`) already reads."""

from __future__ import annotations

from topograph_slurm.errors import UsageError
from topograph_slurm.model import names
from topograph_slurm.model.result import NamedTopology
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.sources.layout import parse_topology


def parse_show_topology(text: str, name: str | None = None) -> NamedTopology:
    """``scontrol show topology [name]`` output as a tree and/or blocks (neither: flat, which
    prints nothing)."""
    found = parse_topology(text, "scontrol show topology")
    return NamedTopology(name or "", found.tree, found.blocks)


def scontrol_topology(scontrol: Scontrol, name: str | None = None) -> NamedTopology:
    """The running topology (with a topology.yaml: the default one, or the one *name*d)."""
    if name is not None:
        names.check([name], "topology", "--topology-name", error=UsageError)
    text = scontrol.run(["show", "topology", *([name] if name else [])])
    return parse_show_topology(text, name)
