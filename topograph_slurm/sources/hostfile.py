"""A launcher's hostfile: which node each rank runs on.

Two kinds of file name nodes, and they mean different things:

- **one line per task**: ``SLURM_HOSTFILE`` for ``srun --distribution=arbitrary`` (and
  ``order --format slurm-hostfile``). Rank r runs on line r's node, so a node's lines are its
  tasks and their positions decide which ranks share it: 16 lines alternating two nodes put
  ranks 0, 2, 4… on the first.
- **one line per node**: a plain node list (``order``'s plain output), a torchrun list
  (``host node-rank``) or an MPI hostfile (``host slots=N``). Ranks are laid on the nodes in
  file order, GPUs-per-node (or the node's ``slots``) at a time; a repeated line names the
  same node again and folds into its first.

``auto`` reads a file that repeats a node without ``slots=`` as one line per task (a node list
never needs to repeat one), anything else as one line per node. Blank lines and ``#``
comments are skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from topograph_slurm.errors import InputError
from topograph_slurm.model import names
from topograph_slurm.model.placement import AUTO, PER_NODE, PER_TASK

_SLOTS = re.compile(r"slots=([0-9]+)\Z")


@dataclass(frozen=True, slots=True)
class Hostfile:
    """The nodes in first-appearance order, how the lines were read, and the ranks each node
    runs when the file says (its tasks, or its ``slots``); empty when GPUs per node decide."""

    nodes: list[str]
    lines: str
    counts: dict[str, int]
    tasks: list[str] | None = None

    def describe(self, source: str) -> str:
        """One line saying how the file was read, for the user to check."""
        if self.tasks is not None:
            return (
                f"hostfile {source}, one line per task: {len(self.tasks)} tasks on "
                f"{len(self.nodes)} nodes"
            )
        slots = " (ranks per node from its slots=)" if self.counts else ""
        return f"hostfile {source}, one line per node: {len(self.nodes)} nodes{slots}"


def parse_hostfile(text: str, source: str, lines: str = AUTO) -> Hostfile:
    """The hostfile *text* read as *lines* (:data:`LINE_KINDS`); an input error when it names
    no node, an invalid node name or a bad ``slots=``."""
    read = (_entry(line, source) for line in text.splitlines())
    entries = [entry for entry in read if entry is not None]
    if not entries:
        raise InputError(f"hostfile {source} names no node")
    order = [node for node, _slots in entries]
    names.check(order, "node", f"hostfile {source}")
    slots = {node: count for node, count in entries if count is not None}
    repeats = len(set(order)) < len(order)
    if lines == PER_TASK or (lines == AUTO and repeats and not slots):
        if slots:
            raise InputError(f"hostfile {source} gives slots=, which a task-per-line file has not")
        return Hostfile(list(dict.fromkeys(order)), PER_TASK, dict(Counter(order)), order)
    nodes = list(dict.fromkeys(order))
    missing = [node for node in nodes if slots and node not in slots]
    if missing:
        raise InputError(f"hostfile {source} gives slots= for some nodes, not for {missing[0]}")
    return Hostfile(nodes, PER_NODE, {node: slots[node] for node in nodes} if slots else {})


def _entry(line: str, source: str) -> tuple[str, int | None] | None:
    """A line's node and its ``slots=`` count (None when it gives none); None for a blank or
    comment line."""
    fields = line.split("#", 1)[0].split()
    if not fields:
        return None
    count = None
    for field in fields[1:]:
        match = _SLOTS.match(field)
        if match:
            count = int(match.group(1))
            if count < 1:
                raise InputError(f"hostfile {source}: {fields[0]} has slots={count}")
    return fields[0], count
