"""The fabric's state across runs: the summary ``generate`` keeps, what the last run left, and
any ``diff`` input read as a summary.

``generate -o FILE`` compares today's fabric with the summary the last run kept beside FILE
(else with FILE itself, placed as it says and last seen when it was written), puts back the
nodes that are off but may keep their place (:mod:`topograph_slurm.analysis.state.keep_missing`),
and computes the "Changes since the last run" with the same :func:`~.topology.drift.drift`
that ``diff`` uses. Recording the new summary is the CLI's last step, after the topology was
written (:func:`topograph_slurm.output.write_summary`), so a refused or failed run leaves the
old state for the next one to compare with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

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
from topograph_slurm.analysis.state.summary import from_topology, summarize
from topograph_slurm.config import Settings
from topograph_slurm.errors import InputError
from topograph_slurm.model.bench import BenchSummary
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Analysis, BlockTopology, Drift, Finding
from topograph_slurm.model.summary import FabricSummary
from topograph_slurm.sources import summary as summary_file
from topograph_slurm.sources.gc_pause import no_cyclic_gc
from topograph_slurm.sources.snapshot import BENCH_FILE, load_bench, looks_like_bench

if TYPE_CHECKING:
    from topograph_slurm.app.fabric import Inputs, Warn

SIM_PREFIX = "sim:"


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


def track(
    settings: Settings,
    inputs: Inputs,
    analysis: Analysis,
    now: datetime,
    needs_blocks: bool,
    listed: frozenset[str] | None,
) -> Tracked | None:
    """Put the missing nodes that may keep their place (those in *listed*, the nodes Slurm
    still lists; none without a node list) back (into ``analysis.tree``, then
    into the blocks), build today's summary and compare it with the last run's. None when
    the output is no file (``-o /dev/null``: there is nothing to keep a summary beside)."""
    output = Path(settings.output) if settings.output else None
    if output is None or (output.exists() and not output.is_file()):
        return None
    previous, findings = previous_summary(output)
    policy = KeepPolicy(parse_duration(settings.keep_missing), listed, now)
    keep, refused = candidates(previous, analysis.hosts.rails, policy)
    analysis.tree, leaves = place_in_tree(analysis.tree, keep)
    blocks, in_blocks = place_in_blocks(_blocks(settings, inputs, analysis, needs_blocks), keep)
    kept, placed = kept_nodes(keep, leaves, in_blocks, policy)
    findings += refused + placed
    analysis.findings += findings
    seen = now.strftime(TIME_FORMAT)
    current = summarize(analysis, blocks, seen, _domains(settings, inputs))
    if kept:
        merged = {**current.nodes, **kept}
        current.nodes = {name: merged[name] for name in sorted(merged, key=natural_key)}
    if previous is None:
        first = f"everything: no earlier run kept a summary or wrote {output}"
        return Tracked(blocks, current, Drift("", current.source, [], [first]), findings)
    return Tracked(blocks, current, drift(previous, current), findings)


def _blocks(
    settings: Settings, inputs: Inputs, analysis: Analysis, needed: bool = True
) -> BlockTopology | None:
    """The blocks ``generate`` would write for this fabric (NVLink or IB units). A run that
    writes none (tree) forms them only for its summary: what cannot form them there (say
    ``--block-source nvlink`` without GPU data) leaves the summary without blocks, as before
    the summary existed, rather than failing the run."""
    from topograph_slurm.app import fabric as pipeline
    from topograph_slurm.slurm import auto as slurm_auto

    version = slurm_auto.release(settings)
    if needed:
        return pipeline.choose_blocks(settings, inputs, analysis, version)
    try:
        return pipeline.choose_blocks(settings, inputs, analysis, version)
    except InputError:
        return None


def _domains(settings: Settings, inputs: Inputs) -> dict[str, str] | None:
    """Each node's NVLink domain when the snapshot has GPU fabric data."""
    from topograph_slurm.app import fabric as pipeline

    if inputs.snapshot is None or not pipeline.wants_nvlink(settings, inputs.snapshot):
        return None
    from topograph_slurm.analysis.nvlink.clique import domain_results

    results = domain_results(inputs.snapshot.gpus)
    return {node: result.domain_id or "" for node, result in results.items()}


def previous_summary(output: Path) -> tuple[FabricSummary | None, list[Finding]]:
    """What the last run left: its kept summary, else the topology file itself (each node
    last seen when the file was written). An unreadable summary is a finding, not a failure:
    the topology must still be written, and this run's summary replaces the broken one."""
    findings = []
    try:
        kept = summary_file.load_summary(summary_file.summary_path(output))
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


# --------------------------------------------------------------------------- diff inputs


def load_side(spec: str, settings: Settings, warn: Warn) -> FabricSummary:
    """A ``diff`` input as a summary: ``sim:SPEC``, a snapshot directory, a kept summary, a
    bench record (no fabric facts), a topology.conf/topology.yaml, or an ibnetdiscover dump
    (in this order of recognition)."""
    from dataclasses import replace

    from topograph_slurm.sources.layout import looks_like_topology, parse_topology

    if spec.startswith(SIM_PREFIX):
        return _fabric(replace(settings, sim=spec[len(SIM_PREFIX) :]), warn)
    path = Path(spec)
    if path.is_dir():
        return _fabric(replace(settings, snapshot=spec), warn)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read {spec}: {err.strerror}") from None
    if summary_file.looks_like_summary(data):
        return summary_file.decode(data, spec)
    if looks_like_bench(data):  # a bench.json alone: its record is the side, no fabric
        return FabricSummary(spec)
    text = data.decode("utf-8", errors="replace")
    if looks_like_topology(text):
        return from_topology(parse_topology(text, spec), spec)
    if data.lstrip()[:1] in (b"{", b"["):  # JSON, and no dump starts so: say what it is not
        raise InputError(
            f"{spec}: JSON that is neither a kept fabric summary nor a bench record "
            "(diff reads dumps, snapshots, topology files, summaries and bench.json)"
        )
    return _fabric(replace(settings, ibnetdiscover=spec), warn)


def _fabric(settings: Settings, warn: Warn) -> FabricSummary:
    """A fabric source analysed as ``generate`` would, its blocks included."""
    from topograph_slurm.app import fabric as pipeline

    with no_cyclic_gc():
        inputs = pipeline.load_inputs(settings, warn)
        if _holds_nothing(inputs):
            return FabricSummary(inputs.fabric.source)
        analysis = pipeline.analysed(inputs, settings)
    blocks = _blocks(settings, inputs, analysis)
    seen = datetime.now(UTC).strftime(TIME_FORMAT)
    return summarize(analysis, blocks, seen, _domains(settings, inputs))


def _holds_nothing(inputs: Inputs) -> bool:
    """A snapshot with neither a fabric nor node outputs (what ``bench --record`` creates
    for a record alone) shows no fabric fact: compared as one, all nodes would vanish."""
    snapshot = inputs.snapshot
    fabric = inputs.fabric
    return snapshot is not None and not snapshot.nodes and not fabric.switches and not fabric.cas


def load_bench_side(spec: str) -> BenchSummary | None:
    """The bench record of a ``diff`` input: a snapshot's ``bench.json`` or a bench record
    file; None for any other input (``load_side`` has read it, or said why it cannot). A
    damaged record is an InputError (exit 3), as it is for ``health``."""
    path = Path(spec)
    if path.is_dir():
        found = (path / BENCH_FILE).is_file()
    else:
        try:
            found = not spec.startswith(SIM_PREFIX) and looks_like_bench(path.read_bytes())
        except OSError:
            found = False
    if not found:
        return None
    record = load_bench(path)
    return BenchSummary(spec, record.created, record.medians, record.findings)
