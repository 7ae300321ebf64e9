"""``generate``'s use case: settings in, the rendered files out (:func:`generate`, which
writes nothing, so a ``--check`` run and a real run compute the same bytes), and the steps of
one unattended run around the writes: the flags that go together, ``--reconfigure``, the
state recorded only after success, and the metrics a run leaves whether it succeeds or fails.

:func:`run` is the whole command in its order (the CLI reads the options, hands the settings
read and its console here, and exits with the code): the settings checked, the state directory
ready, the rendering, the report, the guarded writes of the topology (under ``--reconfigure``'s
lock) and the filters, then :func:`record_state` and :func:`record_success` last, after every
write and any reconfigure took, so state is recorded only after success; :func:`failure_metrics`
wraps the run from the settings' reading on, so a failure still says so to alerting
(``topograph_slurm_success 0``, the last success time kept).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from topograph_slurm.analysis.fabric.block import typical_size
from topograph_slurm.app.fabric import AnalysedFabric, Warn, read_fabric
from topograph_slurm.app.state import Tracked, keeping, prepare_state, track
from topograph_slurm.config import BLOCK_SOURCES, FORMATS, Settings, config_path, state_dir
from topograph_slurm.errors import ConfigError, Exit, InputError, TopographError, UsageError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import (
    PLUGIN_BLOCK,
    PLUGIN_FLAT,
    PLUGIN_TREE,
    Analysis,
    BlockTopology,
    Finding,
    MadeWith,
)
from topograph_slurm.render.environment import environment, render
from topograph_slurm.sources.gc_pause import no_cyclic_gc

# Outputs a run does not ask for (YAML, filters, the report, pictures) are imported where they
# are used: `generate` from cron stays cheap.
if TYPE_CHECKING:
    import jinja2

    from topograph_slurm.model.result import NamedTopology
    from topograph_slurm.render.filters import FilterFacts
    from topograph_slurm.render.metrics import RunOutcome
    from topograph_slurm.sources.fabric_index import FabricIndex

Log = Callable[[str], None]
#: topology.yaml name of blocks made from IB scalable units (NVLink blocks are "nvl").
IB_BLOCK_NAME = "su"
TEMPLATES = {PLUGIN_TREE: "topology.conf.tree.j2", PLUGIN_BLOCK: "topology.conf.block.j2"}


@dataclass(slots=True)
class Generated:
    """Everything one ``generate`` run renders. ``topology`` is None when nothing could be
    placed (the report then says why)."""

    topology: str | None
    report: str = ""
    partition_lines: str = ""
    filters: dict[str, str] = field(default_factory=dict)
    node_count: int = 0
    #: the analysis behind it, for the run's metrics (findings by kind, exclusions)
    analysis: Analysis | None = None
    #: with ``-o FILE``: the fabric summary to keep for it and the changes since the last run
    tracked: Tracked | None = None
    #: the release and node list the topology was made with (its header names them)
    made: MadeWith | None = None
    #: with ``-o FILE``: the fabric index to keep for the job-scoped commands (None: the
    #: source is not kept, see app.fabric.kept_source)
    index: FabricIndex | None = None


def generate(settings: Settings, env: jinja2.Environment, warn: Warn) -> Generated:
    """Read the source, analyse, and render everything *settings* asks for, with cyclic GC
    paused throughout (:mod:`topograph_slurm.sources.gc_pause`)."""
    with no_cyclic_gc():
        return _generate(settings, env, warn)


def _generate(settings: Settings, env: jinja2.Environment, warn: Warn) -> Generated:
    if settings.format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    if settings.block_source not in BLOCK_SOURCES:
        raise ConfigError(f"block_source must be one of {', '.join(BLOCK_SOURCES)}")
    wants_blocks = bool(settings.format != PLUGIN_TREE or settings.filter_dir)
    keep = keeping(settings, datetime.now(UTC).replace(microsecond=0))
    fabric = read_fabric(
        settings,
        warn,
        before_blocks=keep.place_in_tree if keep else None,
        blocks_needed=wants_blocks,
        unit=keep.unit if keep else 0,
    )
    index = _kept_index(fabric, settings) if keep else None  # before this run's own findings
    settings = fabric.settings  # the release resolved
    analysis = fabric.analysis
    analysis.findings += fabric.notes  # where the auto node list and release came from
    tracked = track(keep, fabric) if keep else None
    blocks = (tracked.blocks if tracked else fabric.blocks) if wants_blocks else None
    shown = blocks if settings.format != PLUGIN_TREE else None
    facts = None
    if settings.filter_dir:
        facts, filter_findings = _filter_facts(settings, fabric, blocks)
        analysis.findings += filter_findings
        for finding in filter_findings:
            warn(f"[{finding.kind}] {finding.subject}: {finding.message}")
    # the report folds every leaf's hostlist again: render it only when someone reads it
    report = ""
    if settings.report:
        from topograph_slurm.render.report import render_report

        changes = tracked.changes if tracked else None
        report = render_report(env, analysis, shown, settings.report_format, changes)
        if _is_page(settings.report):
            report = _report_page(env, report, analysis, shown)
    out = Generated(None, report, analysis=analysis, tracked=tracked, made=fabric.made, index=index)
    out.node_count = _placed(settings.format, analysis, blocks)
    if out.node_count == 0:
        return out
    if settings.format == "yaml":
        out.topology, out.partition_lines = _yaml(env, settings, fabric, blocks)
    else:
        from topograph_slurm.render.topology_yaml import check_names

        check_names(analysis.tree if settings.format == PLUGIN_TREE else None, shown)
        out.topology = render(
            env,
            TEMPLATES[settings.format],
            tree=analysis.tree,
            blocks=blocks,
            node_count=out.node_count,
            made=fabric.made,
        )
    if facts is not None:
        from topograph_slurm.render.filters import render_filters

        out.filters = render_filters(facts, env)
    return out


def _kept_index(fabric: AnalysedFabric, settings: Settings) -> FabricIndex | None:
    """The fabric index to keep (the view's places and path facts: imported only here, a
    run to stdout keeps none)."""
    from topograph_slurm.app.view import kept_index

    return kept_index(fabric, settings)


def _is_page(report: str | None) -> bool:
    """Whether ``--report`` names an HTML page (the pictures above the text report)."""
    return report is not None and report.lower().endswith((".html", ".htm"))


def reconfigured(
    settings: Settings, content: str, run: Run, write: Callable[[], int], log: Log
) -> int:
    """*write* the topology; with --reconfigure, under one lock, make slurmctld run it (or put
    the previous file back and fail: see :mod:`topograph_slurm.slurm.reconfigure`)."""
    if not settings.reconfigure or settings.output is None:
        return write()
    from topograph_slurm.analysis.state.keep_missing import parse_duration
    from topograph_slurm.slurm import reconfigure
    from topograph_slurm.slurm.scontrol import Scontrol

    path = Path(settings.output)
    wait = parse_duration(settings.reconfigure_wait).total_seconds()
    guard = reconfigure.PrologGuard(wait, log)
    try:
        with reconfigure.held(path, settings.lock_timeout, state_dir(settings)) as previous:
            code = write()
            scontrol = Scontrol.from_settings(settings)
            run.reconfigured = reconfigure.apply(path, previous, content, scontrol, guard)
    finally:  # the wait goes into the metrics, also when it gave up
        run.deferred = guard.waited
    log(f"{path}: {'slurmctld reconfigured' if run.reconfigured else 'no reconfigure'}")
    return code


def environment_change(old: str, made: MadeWith | None) -> str | None:
    """Why a ``--check`` may differ beyond the fabric: the file on disk names another Slurm
    release or node list than this run had (another host: a CI runner without Slurm, where
    ``auto`` falls back), in words that name the flags to pin; None when they agree or the
    file names none."""
    from topograph_slurm.sources.layout import made_with

    was = made_with(old)
    if was is None or made is None:
        return None
    found = []
    if was.release != made.release:
        found.append(
            f"Slurm {was.release} then, {made.release} now ({made.release_from}): pin "
            f"--slurm-version {was.release}"
        )
    if was.nodes != made.nodes:
        found.append(
            f"node list {was.nodes} then, {made.nodes} now ({made.nodes_from}): pin "
            "--slurm-nodes (the nodes' hostlist, or all)"
        )
    return "; ".join(found) or None


def record_state(settings: Settings, result: Generated) -> None:
    """The last step of a run that wrote its outputs: keep the fabric summary of ``-o``
    for the next run's "Changes since the last run" and ``--keep-missing``, then the fabric
    index the job-scoped commands read. Only after success: a refused or failed write raised
    before this, leaving the last good state."""
    if settings.output is None or result.tracked is None:
        return
    from topograph_slurm.output import write_fabric_index, write_summary

    write_summary(
        Path(settings.output),
        result.tracked.summary,
        state_dir=state_dir(settings),
        lock_timeout=settings.lock_timeout,
    )
    if result.index is not None:
        write_fabric_index(result.index, state_dir(settings), settings.lock_timeout)


def _topologies(
    settings: Settings, analysis: Analysis, blocks: BlockTopology | None, nvlink: bool
) -> list[NamedTopology]:
    """ib (tree), nvl (NVLink blocks) or su (IB scalable-unit blocks), and flat."""
    from topograph_slurm.model.result import NamedTopology
    from topograph_slurm.render.topology_yaml import DEFAULT_NAMES

    defaults = {
        **DEFAULT_NAMES,
        PLUGIN_BLOCK: DEFAULT_NAMES[PLUGIN_BLOCK] if nvlink else IB_BLOCK_NAME,
    }
    names = {**defaults, **(settings.yaml_names or {})}
    topologies = []
    if analysis.node_count:
        topologies.append(NamedTopology(names[PLUGIN_TREE], tree=analysis.tree))
    if blocks is not None and blocks.blocks:
        topologies.append(NamedTopology(names[PLUGIN_BLOCK], blocks=blocks))
    topologies.append(NamedTopology(names[PLUGIN_FLAT]))
    return topologies


def _yaml(
    env: jinja2.Environment,
    settings: Settings,
    fabric: AnalysedFabric,
    blocks: BlockTopology | None,
) -> tuple[str, str]:
    """topology.yaml and the slurm.conf partition lines that use its topologies."""
    from topograph_slurm.render.topology_yaml import (
        default_partitions,
        partitions_from_map,
        render_partition_lines,
        render_topology_yaml,
    )

    topologies = _topologies(settings, fabric.analysis, blocks, fabric.nvlink)
    default = settings.yaml_default or topologies[0].name
    text = render_topology_yaml(env, topologies, default, fabric.version, fabric.made)
    partitions = (
        partitions_from_map(settings.partitions, topologies)
        if settings.partitions
        else default_partitions(topologies)
    )
    return text, render_partition_lines(env, partitions, default)


def _filter_facts(
    settings: Settings, fabric: AnalysedFabric, blocks: BlockTopology | None
) -> tuple[FilterFacts, list[Finding]]:
    """The --tp-size filter facts: block and leaf sizes measured on this fabric, GPUs per node
    counted in the snapshot's ``nvidia-smi topo -m`` (the config overrides either). The config
    names no nodes per partition, so every snapshot node counts for every partition."""
    from topograph_slurm.analysis.nvlink.gpus import disagreement, typical_gpus
    from topograph_slurm.render.filters import filter_facts

    if not settings.filter:
        raise ConfigError("--filter-dir needs a 'filter' section with partitions in the config")
    leaf_size = typical_size(len(leaf.nodes) for leaf in fabric.analysis.tree.leaves)
    measured = {PLUGIN_BLOCK: blocks.block_sizes[0] if blocks else 0, PLUGIN_TREE: leaf_size}
    snapshot = fabric.inputs.snapshot
    nodes = snapshot.nodes if snapshot else {}
    node_gpus = {name: node.topology.gpu_count for name, node in nodes.items() if node.topology}
    gpus = typical_gpus(node_gpus)
    facts, filled = filter_facts(settings.filter, measured, settings.slurm_version, gpus)
    findings = [disagreement(partition, node_gpus, gpus) for partition in filled]
    return facts, [finding for finding in findings if finding is not None]


def _placed(fmt: str, analysis: Analysis, blocks: BlockTopology | None) -> int:
    """How many nodes the requested format places."""
    if blocks:
        from topograph_slurm.analysis.nvlink.domains import blocks_node_count

        in_blocks = blocks_node_count(blocks)
    else:
        in_blocks = 0
    in_tree = sum(len(leaf.nodes) for leaf in analysis.tree.leaves)  # kept nodes too
    return {PLUGIN_TREE: in_tree, PLUGIN_BLOCK: in_blocks}.get(fmt, max(in_tree, in_blocks))


def _report_page(
    env: jinja2.Environment, report: str, analysis: Analysis, blocks: BlockTopology | None
) -> str:
    """The report as an HTML page with the fabric pictures above it (``--report FILE.html``):
    the blocks drawn are the ones the topology file gets."""
    from topograph_slurm.render.draw.fabric import fabric_pictures, scene
    from topograph_slurm.render.draw.picture import render_page

    tree = analysis.tree if analysis.node_count else None
    findings = blocks.findings if blocks else []
    source = analysis.fabric.source
    pictures = fabric_pictures(scene(tree, blocks, analysis, findings, source))
    return render_page(env, f"topograph-slurm report — {source}", pictures, report)


@dataclass(slots=True)
class Run:
    """When the run started and what it did to the topology file and slurmctld."""

    started: float = field(default_factory=time.monotonic)
    written: bool = False
    reconfigured: bool = False
    #: how long --reconfigure waited for jobs in their prolog (None: it did not look)
    deferred: float | None = None

    @property
    def duration(self) -> float:
        return time.monotonic() - self.started


def check_flags(settings: Settings, check: bool, given: Mapping[str, Any]) -> Settings:
    """*settings* for this run: --reconfigure applies a written -o file, so it needs -o and a
    scontrol to run (checked here, before anything is written); --check writes nothing, so
    --reconfigure and --metrics on its command line are usage errors, and from the config (a
    cron job's, reused for a check) they are left out."""
    if _is_page(settings.report) and settings.report_format != "text":
        raise UsageError(
            f"--report {settings.report} is an HTML page around the text report: drop "
            "--json or name another file"
        )
    if check and (given.get("reconfigure") or given.get("metrics")):
        raise UsageError("--check writes nothing: drop --reconfigure and --metrics")
    if check:
        return replace(settings, reconfigure=False, metrics=None)
    if settings.reconfigure and settings.output is None:
        raise UsageError("--reconfigure needs -o PATH: slurmctld reads a file")
    if settings.reconfigure:  # before any write: a file slurmctld cannot be asked to take
        from topograph_slurm.slurm.scontrol import Scontrol

        Scontrol.from_settings(settings).require(
            "--reconfigure needs slurm-client; nothing written", "--reconfigure"
        )
    return settings


@dataclass(slots=True)
class MetricsTarget:
    """Where a run's metrics go and the templates they render with, as far as the run got:
    the --metrics flag, else *guess* (asked only on a failure before the settings are read),
    the settings' once they are, the site's templates once they load (before: the built-in
    ones)."""

    path: str | None = None
    env: jinja2.Environment | None = None
    guess: Callable[[], str | None] | None = None

    def settle(self, settings: Settings) -> None:
        """The settings are read: their metrics file is the one (or none), no more guessing."""
        self.path, self.guess = settings.metrics, None


def _write_metrics(target: MetricsTarget, run: Run, outcome: RunOutcome | None) -> None:
    from topograph_slurm.output import write_file
    from topograph_slurm.render.metrics import render_metrics
    from topograph_slurm.sources.metrics import load_last_success

    assert target.path is not None
    path = Path(target.path)
    text = render_metrics(
        target.env or environment(None),
        finished=time.time(),
        duration=run.duration,
        outcome=outcome,
        last_success=None if outcome else load_last_success(path),
        deferred=run.deferred,
    )
    write_file(path, text)


@contextlib.contextmanager
def failure_metrics(target: MetricsTarget, run: Run) -> Iterator[None]:
    """On any failure (an expected one, or a bug: exit 70), from the config's reading on,
    metrics that say so when a metrics file is known, then the failure itself; metrics that
    cannot be written then do not hide the failure that matters."""
    try:
        yield
    except Exception:
        if target.path is None and target.guess is not None:
            target.path = target.guess()
        if target.path:
            with contextlib.suppress(TopographError, OSError):
                _write_metrics(target, run, None)
        raise


def record_success(settings: Settings, target: MetricsTarget, result: Generated, run: Run) -> None:
    """What a successful run leaves for the next one and for alerting: its metrics."""
    if not settings.metrics:
        return
    from topograph_slurm.render.metrics import outcome_of

    tracked = result.tracked
    outcome = outcome_of(
        result.analysis,
        result.node_count,
        run.written,
        run.reconfigured,
        kept_missing=(
            sum(f.kind == FindingKind.KEPT_MISSING for f in tracked.findings) if tracked else 0
        ),
        # the first run (no summary kept yet) has nothing to compare with: not measured
        changes=len(tracked.changes.changes) if tracked and tracked.changes.old else None,
    )
    _write_metrics(target, run, outcome)


class Console(Protocol):
    """Where a run's words go (the CLI's display), in the order the run says them."""

    def echo(self, text: str, *, err: bool = False) -> None:
        """*text* as it is (no newline added), on stdout or, with *err*, stderr."""

    def log(self, message: str) -> None:
        """A progress line (the CLI drops it under ``-q``)."""

    def warn(self, message: str) -> None:
        """A warning line (a finding, an insecure source)."""


@dataclass(frozen=True, slots=True)
class Request:
    """What the command line asks of a run beyond its settings."""

    check: bool = False
    diff: bool = False
    force: bool = False
    #: the flags as given (``check_flags`` tells a typed --reconfigure/--metrics from the
    #: config's)
    given: Mapping[str, Any] = field(default_factory=dict)
    #: the --config file named, for the metrics file of a run whose config is refused
    config_file: str | None = None
    #: --json's report holds stdout: the topology is not printed there
    json_out: bool = False


def run(read_settings: Callable[[], Settings], request: Request, console: Console) -> int:
    """One ``generate`` command, in its order: the settings read (by *read_settings*, inside
    the failure metrics) and checked, the state directory ready before any write, the
    rendering, the report, the topology written (with --reconfigure under one lock), the
    partition lines, the filters, and the state and metrics recorded last, only after
    success; the exit code."""
    progress = Run()
    guess = None if request.check else lambda: config_metrics(request.config_file)
    target = MetricsTarget(None if request.check else request.given.get("metrics"), guess=guess)
    with failure_metrics(target, progress):
        settings = check_flags(read_settings(), request.check, request.given)
        target.settle(settings)
        if not request.check:  # the state directory checked before anything is written
            moved = prepare_state(settings)
            if moved:
                console.log(moved)
        env = environment(Path(settings.templates) if settings.templates else None)
        target.env = env
        result = generate(settings, env, console.warn)
        if settings.report:
            _emit_report(settings, result.report, request, console)
        if result.topology is None:
            raise InputError("nothing could be placed: no host became a Slurm node (see --report)")
        topology = result.topology
        code = reconfigured(
            settings,
            topology,
            progress,
            lambda: _write(settings, topology, result.made, request, progress, console),
            console.log,
        )
        if result.partition_lines:
            console.log("Partitions for slurm.conf:\n" + result.partition_lines.rstrip())
        if settings.filter_dir:
            code = max(code, _write_filters(settings, result.filters, request, console))
        # Record state only after success: reached only when every write (and slurmctld's
        # reconfigure, when asked) took; a failure above leaves the previous record alone.
        if not request.check:
            record_state(settings, result)
        record_success(settings, target, result, progress)
    return code


def config_metrics(config_file: str | None) -> str | None:
    """The config's ``metrics`` file as far as the config can be read at all (YAML with the
    key as a string), so a run whose config is refused still tells alerting it failed."""
    import yaml

    path, _required = config_path(config_file)
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (
        OSError,
        ValueError,
        RecursionError,
        yaml.YAMLError,
    ):  # ValueError: bad UTF-8, huge ints
        return None
    found = data.get("metrics") if isinstance(data, dict) else None
    return found if isinstance(found, str) and found else None


def _emit_report(settings: Settings, text: str, request: Request, console: Console) -> None:
    """The report to a file, or to stdout (stderr when the topology itself goes to stdout:
    without -o, unless --json puts the report there instead)."""
    if settings.report == "-":
        console.echo(text, err=settings.output is None and not request.json_out)
    elif settings.report:
        from topograph_slurm.output import write_output

        write_output(
            settings.report,
            text,
            state_dir=state_dir(settings),
            lock_timeout=settings.lock_timeout,
        )


def _write(
    settings: Settings,
    content: str,
    made: MadeWith | None,
    request: Request,
    progress: Run,
    console: Console,
) -> int:
    """Print or write the topology; returns the exit code. A stale --check says when the
    file was *made* with another release or node list than this run's (another host)."""
    check, diff = request.check, request.diff
    if settings.output is None:
        if not (check or diff or request.json_out):  # --check --filter-dir alone: the filters
            console.echo(content)
        return Exit.OK
    from topograph_slurm.output import write_topology

    outcome = write_topology(
        Path(settings.output),
        content,
        check=check,
        show_diff=diff,
        force=request.force,
        shrink_limit=settings.shrink_limit,
        lock_timeout=settings.lock_timeout,
        state_dir=state_dir(settings),
    )
    if (check or diff) and outcome.diff:
        console.echo(outcome.diff)
    if check and not outcome.changed:
        console.log(f"{settings.output}: up to date")
    if check and outcome.changed:
        why = environment_change(outcome.old, made)
        console.log(
            f"{settings.output}: out of date" + (f"; the environment differs: {why}" if why else "")
        )
    if check:
        return Exit.DIFFERS if outcome.changed else Exit.OK
    progress.written = outcome.written
    state = "written" if outcome.written else "unchanged"
    console.log(f"{settings.output}: {state} ({outcome.new_nodes} nodes)")
    return Exit.OK


def _write_filters(
    settings: Settings, files: dict[str, str], request: Request, console: Console
) -> int:
    """Write the filter files (atomic, only on change); 1 when --check finds them stale."""
    from topograph_slurm.output import write_tree

    check = request.check
    directory = Path(str(settings.filter_dir))
    outcomes = write_tree(
        directory, files, check=check, show_diff=request.diff, state_dir=state_dir(settings)
    )
    changed = [o for o in outcomes if o.changed]
    for outcome in changed:
        if check or request.diff:
            console.echo(outcome.diff)
    state = "out of date" if check else "written"
    console.log(f"{directory}: {len(changed)} of {len(outcomes)} filter files {state}")
    return Exit.DIFFERS if check and changed else Exit.OK
