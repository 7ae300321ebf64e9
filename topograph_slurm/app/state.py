"""The fabric's state across ``generate`` runs: the summary it keeps and what the last run left.

``generate -o FILE`` compares today's fabric with the summary the last run kept for FILE in
the state directory (else with FILE itself, placed as it says and last seen when it was
written), puts back the nodes that are off but may keep their place
(:mod:`topograph_slurm.analysis.state.keep_missing`), and computes the "Changes since the last
run" with the same :func:`~topograph_slurm.analysis.state.drift.drift` that ``diff`` uses.
Recording the new summary is the run's last step, after the topology was written
(:func:`topograph_slurm.output.write_summary`), so a refused or failed run leaves the old
state for the next one to compare with.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from topograph_slurm.analysis.state.drift import drift
from topograph_slurm.analysis.state.keep_missing import (
    TIME_FORMAT,
    KeepPolicy,
    candidates,
    kept_nodes,
    parse_duration,
    place_in_blocks,
    place_in_tree,
)
from topograph_slurm.analysis.state.summary import designed_unit, from_topology, summarize
from topograph_slurm.app.fabric import AnalysedFabric, node_domains
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import InputError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Analysis, BlockTopology, Drift, Finding
from topograph_slurm.model.summary import FabricSummary, NodeSummary
from topograph_slurm.output import kept_summary_path
from topograph_slurm.sources import summary as summary_file


@dataclass(slots=True)
class Tracked:
    """One ``generate`` run against the last: the blocks with kept nodes put back (this
    fabric's blocks even for a tree run: the summary records them for a later block run), the
    summary to record, and the changes since the last run (on the first run: none, and a
    "not compared" line saying why)."""

    blocks: BlockTopology | None
    summary: FabricSummary
    changes: Drift
    findings: list[Finding] = field(default_factory=list)


@dataclass(slots=True)
class Keeping:
    """What the last run left for ``-o`` and the missing nodes that may keep their place
    (those Slurm still lists), once they are back in the tree (:meth:`place_in_tree`)."""

    output: Path
    state_dir: Path
    previous: FabricSummary | None
    policy: KeepPolicy
    keep: dict[str, NodeSummary] = field(default_factory=dict)
    leaves: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def unit(self) -> int:
        """The IB unit size the last run saw (0 on the first run): BlockSizes' least base."""
        return designed_unit(self.previous) if self.previous is not None else 0

    def place_in_tree(self, analysis: Analysis, listed: frozenset[str] | None) -> None:
        """Put the missing nodes that may keep their place (those in *listed*, the nodes
        Slurm still lists; none without a node list) back into ``analysis.tree``, before the
        blocks are formed from it (:func:`~topograph_slurm.app.fabric.read_fabric`)."""
        self.policy = dataclasses.replace(self.policy, slurm_nodes=listed)
        keep, refused = candidates(self.previous, analysis.hosts.rails, self.policy)
        analysis.tree, self.leaves = place_in_tree(analysis.tree, keep)
        self.keep = dict(keep)
        self.findings += refused


def keeping(settings: Settings, now: datetime) -> Keeping | None:
    """The last run's state for ``-o FILE``; None when the output is no file (``-o
    /dev/null``: there is nothing to keep a summary for)."""
    output = _file_output(settings)
    if output is None:
        return None
    directory = state_dir(settings)
    kept_summary_path(output, directory)  # refused before anything is written, as at the end
    previous, findings = previous_summary(output, directory)
    policy = KeepPolicy(parse_duration(settings.keep_missing), None, now)
    return Keeping(output, directory, previous, policy, findings=findings)


def prepare_state(settings: Settings) -> str | None:
    """Before a run writes: the state directory made (and found writable) and the state an
    older release kept beside ``-o`` moved into it, under the output's lock so two runs do
    not both move it; the log line saying what moved (None: nothing)."""
    from topograph_slurm.output import (
        make_state_dir,
        move_legacy_state,
        output_lock,
        trusted_target,
    )

    output = _file_output(settings)
    if output is None and not settings.filter_dir:
        return None
    directory = state_dir(settings)
    make_state_dir(directory)
    if output is None:
        return None
    target = trusted_target(output)
    with output_lock(target, settings.lock_timeout, directory):
        return move_legacy_state(target, directory)


def _file_output(settings: Settings) -> Path | None:
    """``-o FILE`` when it names a file (or none yet); None for no ``-o`` or a device (``-o
    /dev/null``: nothing to keep state for)."""
    output = Path(settings.output) if settings.output else None
    if output is None or (output.exists() and not output.is_file()):
        return None
    return output


def track(state: Keeping, fabric: AnalysedFabric) -> Tracked:
    """The kept nodes put into the fabric's blocks too, today's summary, and what changed
    since the last run."""
    analysis = fabric.analysis
    blocks, in_blocks = place_in_blocks(fabric.blocks, state.keep)
    kept, placed = kept_nodes(state.keep, state.leaves, in_blocks, state.policy)
    findings = state.findings + placed
    analysis.findings += findings
    seen = state.policy.now.strftime(TIME_FORMAT)
    current = summarize(analysis, blocks, seen, node_domains(fabric))
    if kept:
        merged = {**current.nodes, **kept}
        current.nodes = {name: merged[name] for name in sorted(merged, key=natural_key)}
    if state.previous is None:
        first = f"everything: no earlier run kept a summary or wrote {state.output}"
        return Tracked(blocks, current, Drift("", current.source, [], [first]), findings)
    return Tracked(blocks, current, drift(state.previous, current), findings)


def previous_summary(output: Path, directory: Path) -> tuple[FabricSummary | None, list[Finding]]:
    """What the last run left: its kept summary (in *directory*; beside *output* where an
    older release kept it and no run moved it yet, e.g. a ``--check``), else the topology file
    itself (each node last seen when the file was written). An unreadable summary is a
    finding, not a failure: the topology must still be written, and this run's summary
    replaces the broken one."""
    findings = []
    kept_at = summary_file.summary_path(output, directory)
    if not kept_at.exists():
        kept_at = summary_file.legacy_summary_path(output)
    try:
        kept = summary_file.load_summary(kept_at)
    except InputError as err:
        findings.append(
            Finding(FindingKind.SUMMARY_UNREADABLE, str(output), f"{err}; using {output}")
        )
        kept = None
    if kept is not None:
        return kept, findings
    return _from_output(output), findings


def _from_output(output: Path) -> FabricSummary | None:
    """The topology file as a summary, its nodes last seen at its mtime; None when there is
    none (the first run) or it is no topology we can read."""
    from topograph_slurm.sources.layout import load_topology

    try:
        written = datetime.fromtimestamp(os.stat(output).st_mtime, UTC)
        previous = from_topology(load_topology(output), str(output))
    except (OSError, InputError):
        return None
    for node in previous.nodes.values():
        node.last_seen = written.strftime(TIME_FORMAT)
    return previous
