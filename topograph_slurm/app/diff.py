"""``diff``'s use case: two inputs read as fabric summaries (and their bench records), and
what changed between them.

An input is ``sim:SPEC``, a snapshot directory, the summary ``generate -o`` keeps, a bench
record, a topology file, or a dump; a fabric source is analysed as ``generate`` analyses it
(:func:`~topograph_slurm.app.fabric.read_fabric`), so ``diff`` compares what ``generate``
would write.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from topograph_slurm.analysis.bench.drift import (
    DEFAULT_THRESHOLD as DEFAULT_THRESHOLD,  # re-exported: diff --help shows it
)
from topograph_slurm.analysis.bench.drift import with_bench
from topograph_slurm.analysis.state.drift import drift
from topograph_slurm.analysis.state.keep_missing import TIME_FORMAT
from topograph_slurm.analysis.state.summary import from_topology, summarize
from topograph_slurm.app.fabric import Inputs, Warn, node_domains, read_fabric
from topograph_slurm.config import Settings
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model.bench import BenchSummary
from topograph_slurm.model.result import Drift
from topograph_slurm.model.summary import FabricSummary
from topograph_slurm.sources import summary as summary_file
from topograph_slurm.sources.snapshot import BENCH_FILE, load_bench, looks_like_bench

SIM_PREFIX = "sim:"


def compare(old: str, new: str, settings: Settings, warn: Warn, bench_drift: float) -> Drift:
    """What changed from *old* to *new*: the fabric facts both show, and the bench records'
    level medians and findings when both carry one. The inputs are the arguments: fabric
    sources in *settings* (from the config file) do not apply."""
    settings = dataclasses.replace(
        settings, ibnetdiscover=None, sim=None, ufm=None, netq=None, snapshot=None
    )
    before = dataclasses.replace(load_side(old, settings, warn), source=old)
    after = dataclasses.replace(load_side(new, settings, warn), source=new)
    records = load_bench_side(old), load_bench_side(new)
    return with_bench(drift(before, after), *records, bench_drift)


def load_side(spec: str, settings: Settings, warn: Warn) -> FabricSummary:
    """A ``diff`` input as a summary: ``sim:SPEC``, a snapshot directory, a kept summary, a
    bench record (no fabric facts), a topology.conf/topology.yaml, or an ibnetdiscover dump
    (in this order of recognition)."""
    from topograph_slurm.sources.layout import looks_like_topology, parse_topology

    if spec.startswith(SIM_PREFIX):
        sim = spec[len(SIM_PREFIX) :]
        if not sim.strip():  # an empty --sim means no source: the live ibnetdiscover would run
            raise UsageError(f"{spec!r} names no simulation: sim:demo or sim:nodes=N,…")
        return _fabric(dataclasses.replace(settings, sim=sim), warn)
    path = Path(spec)
    if path.is_dir():
        return _fabric(dataclasses.replace(settings, snapshot=spec), warn)
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
    return _fabric(dataclasses.replace(settings, ibnetdiscover=spec), warn)


def _fabric(settings: Settings, warn: Warn) -> FabricSummary:
    """A fabric source analysed as ``generate`` would, its blocks included."""
    fabric = read_fabric(settings, warn)
    if _holds_nothing(fabric.inputs):
        return FabricSummary(fabric.source)
    seen = datetime.now(UTC).strftime(TIME_FORMAT)
    return summarize(fabric.analysis, fabric.blocks, seen, node_domains(fabric))


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
