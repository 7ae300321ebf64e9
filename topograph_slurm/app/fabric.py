"""`generate` from settings to rendered files, without touching the output paths.

The CLI parses flags into :class:`~topograph_slurm.config.Settings` and hands them here; this
module reads the one fabric source (dump, UFM, snapshot, simulation or the live
``ibnetdiscover``), runs the pure analysis, picks the blocks (NVLink domains from a snapshot, or
InfiniBand scalable units) and renders every requested file. Writing is left to the CLI and
:mod:`topograph_slurm.output`, so a ``--check`` run and a real run compute the same bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from topograph_slurm.analysis.fabric.analyse import analyse, ib_blocks
from topograph_slurm.analysis.fabric.block import typical_size
from topograph_slurm.analysis.fabric.naming import (
    NamingPolicy,
    compile_hcas,
    compile_rewrites,
)
from topograph_slurm.config import BLOCK_SOURCES, FORMATS, Settings
from topograph_slurm.errors import ConfigError, InputError, UsageError
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.result import (
    PLUGIN_BLOCK,
    PLUGIN_FLAT,
    PLUGIN_TREE,
    Analysis,
    BlockTopology,
    Finding,
)
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import render
from topograph_slurm.slurm import auto as slurm_auto
from topograph_slurm.sources import ibnetdiscover
from topograph_slurm.sources.gc_pause import no_cyclic_gc
from topograph_slurm.sources.node_name_map import load_node_name_map

# Sources and outputs a run does not ask for (UFM's HTTP stack, snapshots, NVLink, YAML,
# filters, the report) are imported where they are used: `generate` from cron stays cheap.
if TYPE_CHECKING:
    import jinja2

    from topograph_slurm.app.state import Tracked
    from topograph_slurm.model.result import NamedTopology
    from topograph_slurm.render.filters import FilterFacts
    from topograph_slurm.sources import ufm
    from topograph_slurm.sources.snapshot import Snapshot

Warn = Callable[[str], None]
#: topology.yaml name of blocks made from IB scalable units (NVLink blocks are "nvl").
IB_BLOCK_NAME = "su"
TEMPLATES = {PLUGIN_TREE: "topology.conf.tree.j2", PLUGIN_BLOCK: "topology.conf.block.j2"}
#: ``--sim demo``: a small DGX SuperPOD-like fabric (4 scalable units of 8 nodes, 8 rails).
DEMO_SIM = "nodes=32,gpus=8,rails=8,su=8,tiers=2,sharp=1"


@dataclass(slots=True)
class Inputs:
    """What the sources delivered: the IB fabric (possibly empty) and an optional snapshot."""

    fabric: Fabric
    snapshot: Snapshot | None = None


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
    #: with ``-o FILE``: the fabric summary to keep beside it and the changes since the last run
    tracked: Tracked | None = None


def read_text(path: str) -> str:
    """A dump file, or stdin for ``-``, decoded leniently (dumps carry stray bytes)."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None
    return data.decode("utf-8", errors="replace")


def fetch_ufm(settings: Settings, warn: Warn) -> ufm.UfmResponses:
    """Ask UFM for the fabric (credentials from a file or the environment, never argv)."""
    from topograph_slurm.sources import ufm

    assert settings.ufm is not None
    options = ufm.FetchOptions(
        ca_bundle=Path(settings.ufm_ca_bundle) if settings.ufm_ca_bundle else None,
        insecure=settings.ufm_insecure,
        timeout=settings.ufm_timeout,
        deadline=settings.ufm_deadline,
        max_bytes=settings.ufm_max_response_mib * ufm.MIB,
    )
    credentials = Path(settings.ufm_credentials) if settings.ufm_credentials else None
    return ufm.collect_ufm(settings.ufm, credentials, options, env=os.environ, warn=warn)


def _snapshot_fabric(path: Path, snapshot: Snapshot) -> Fabric:
    """The IB fabric stored in a snapshot: UFM answers, else ibnetdiscover text, else none."""
    from topograph_slurm.sources import ufm

    if ufm.has_snapshot(path):
        return ufm.fabric_from_ufm(ufm.load_responses(path), source=str(path))
    if snapshot.ibnetdiscover is not None:
        source = str(path / "fabric" / "ibnetdiscover.txt")
        return ibnetdiscover.parse_ibnetdiscover(snapshot.ibnetdiscover, source)
    return Fabric(source=str(path))


def load_inputs(settings: Settings, warn: Warn) -> Inputs:
    """Exactly one fabric source: dump, UFM, snapshot, simulation, or the live ibnetdiscover."""
    given = [key for key in ("ibnetdiscover", "sim", "ufm", "snapshot") if getattr(settings, key)]
    if len(given) > 1:
        names = " and ".join("--" + key for key in given)
        raise UsageError(f"give one fabric source, not {names}")
    if settings.snapshot:
        from topograph_slurm.sources.snapshot import load_snapshot

        path = Path(settings.snapshot)
        snapshot = load_snapshot(path)
        return Inputs(_snapshot_fabric(path, snapshot), snapshot)
    if settings.ufm:
        from topograph_slurm.sources import ufm

        return Inputs(ufm.fabric_from_ufm(fetch_ufm(settings, warn)))
    if settings.sim:
        from topograph_slurm.sources import sim

        spec = DEMO_SIM if settings.sim == "demo" else settings.sim
        text = sim.generate_ibnetdiscover(sim.parse_sim_spec(spec))
        return Inputs(ibnetdiscover.parse_ibnetdiscover(text, f"sim:{spec}"))
    if settings.ibnetdiscover:
        source = "<stdin>" if settings.ibnetdiscover == "-" else settings.ibnetdiscover
        text = read_text(settings.ibnetdiscover)
        return Inputs(ibnetdiscover.parse_ibnetdiscover(text, source))
    command = settings.ibnetdiscover_command
    text = ibnetdiscover.run_ibnetdiscover(command.binary, command.args, command.timeout)
    return Inputs(ibnetdiscover.parse_ibnetdiscover(text, command.binary))


def read_and_analyse(settings: Settings, warn: Warn) -> tuple[Inputs, Analysis]:
    """The fabric source read and analysed as ``generate`` does, for the commands that look at
    a fabric rather than write its topology (health, explain/order, draw), with cyclic GC
    paused as for ``generate`` (:mod:`topograph_slurm.sources.gc_pause`)."""
    with no_cyclic_gc():
        inputs = load_inputs(settings, warn)
        return inputs, analysed(inputs, settings)


def analysed(inputs: Inputs, settings: Settings) -> Analysis:
    """The inputs' fabric analysed with the settings' naming and tier limit (call with cyclic
    GC paused: :func:`read_and_analyse`)."""
    return analyse(inputs.fabric, naming_policy(settings), settings.max_tiers)


def naming_policy(settings: Settings, notes: list[Finding] | None = None) -> NamingPolicy:
    """Node-name map, rewrites, the HCA selection and the Slurm node list from settings;
    *notes* gets the finding that says where an ``auto`` node list came from."""
    policy = NamingPolicy(
        rewrites=compile_rewrites((rule.pattern, rule.replace) for rule in settings.rewrites),
        hcas=compile_hcas(settings.hcas),
    )
    if settings.node_name_map:
        policy.node_name_map = load_node_name_map(Path(settings.node_name_map))
    policy.slurm_nodes = slurm_auto.node_list(settings, [] if notes is None else notes)
    return policy


def wants_nvlink(settings: Settings, snapshot: Snapshot | None) -> bool:
    """Blocks from NVLink domains when asked, or (auto) when a snapshot has GPU fabric data."""
    has_gpus = snapshot is not None and any(n.gpus for n in snapshot.nodes.values())
    if settings.block_source == "nvlink" and not has_gpus:
        raise InputError("--block-source nvlink needs a --snapshot with nvidia-smi output")
    return settings.block_source == "nvlink" or (settings.block_source == "auto" and has_gpus)


def choose_blocks(
    settings: Settings, inputs: Inputs, analysis: Analysis, version: SlurmVersion
) -> BlockTopology | None:
    """NVLink-domain blocks (ordered by the IB tree when there is one), IB unit blocks, or
    None when neither source places a node."""
    if not wants_nvlink(settings, inputs.snapshot):
        return ib_blocks(analysis, version, settings.block_sizes) if analysis.node_count else None
    from topograph_slurm.analysis.nvlink.clique import domain_results
    from topograph_slurm.analysis.nvlink.domains import NvlinkPolicy, nvlink_blocks
    from topograph_slurm.sources.layout import load_layout

    assert inputs.snapshot is not None
    layout_path = settings.layout or settings.output
    return nvlink_blocks(
        domain_results(inputs.snapshot.gpus),
        version,
        policy=NvlinkPolicy(settings.nvlink_unhealthy, settings.block_name_pattern),
        block_sizes=settings.block_sizes,
        tree=analysis.tree if analysis.node_count else None,
        layout=load_layout(layout_path) if layout_path else (),
        findings=inputs.snapshot.findings,
    )


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
    inputs: Inputs,
    analysis: Analysis,
    blocks: BlockTopology | None,
    version: SlurmVersion,
) -> tuple[str, str]:
    """topology.yaml and the slurm.conf partition lines that use its topologies."""
    from topograph_slurm.render.topology_yaml import (
        default_partitions,
        partitions_from_map,
        render_partition_lines,
        render_topology_yaml,
    )

    nvlink = wants_nvlink(settings, inputs.snapshot)
    topologies = _topologies(settings, analysis, blocks, nvlink)
    default = settings.yaml_default or topologies[0].name
    text = render_topology_yaml(env, topologies, default, version)
    partitions = (
        partitions_from_map(settings.partitions, topologies)
        if settings.partitions
        else default_partitions(topologies)
    )
    return text, render_partition_lines(env, partitions, default)


def _filter_facts(
    settings: Settings, inputs: Inputs, analysis: Analysis, blocks: BlockTopology | None
) -> tuple[FilterFacts, list[Finding]]:
    """The --tp-size filter facts: block and leaf sizes measured on this fabric, GPUs per node
    counted in the snapshot's ``nvidia-smi topo -m`` (the config overrides either). The config
    names no nodes per partition, so every snapshot node counts for every partition."""
    from topograph_slurm.analysis.nvlink.gpus import disagreement, typical_gpus
    from topograph_slurm.render.filters import filter_facts

    if not settings.filter:
        raise ConfigError("--filter-dir needs a 'filter' section with partitions in the config")
    leaf_size = typical_size(len(leaf.nodes) for leaf in analysis.tree.leaves)
    measured = {PLUGIN_BLOCK: blocks.block_sizes[0] if blocks else 0, PLUGIN_TREE: leaf_size}
    nodes = inputs.snapshot.nodes if inputs.snapshot else {}
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


def _track(
    settings: Settings,
    inputs: Inputs,
    analysis: Analysis,
    needs_blocks: bool,
    listed: frozenset[str] | None,
) -> Tracked | None:
    """With ``-o FILE``: nodes that are off keep their place (those Slurm still lists: *listed*,
    the run's node list), and what changed since the last run (see
    :mod:`topograph_slurm.app.state`); the summary is recorded by the CLI last."""
    if not settings.output:
        return None
    from datetime import UTC, datetime

    from topograph_slurm.app.state import track

    now = datetime.now(UTC).replace(microsecond=0)
    return track(settings, inputs, analysis, now, needs_blocks, listed)


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


def generate(settings: Settings, env: jinja2.Environment, warn: Warn) -> Generated:
    """Read the source, analyse, and render everything *settings* asks for."""
    if settings.format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    if settings.block_source not in BLOCK_SOURCES:
        raise ConfigError(f"block_source must be one of {', '.join(BLOCK_SOURCES)}")
    notes: list[Finding] = []  # where the auto node list and release came from
    settings = slurm_auto.resolve_version(settings, notes)
    version = SlurmVersion.parse(settings.slurm_version)
    inputs = load_inputs(settings, warn)
    policy = naming_policy(settings, notes)  # asks Slurm for its nodes once per run
    analysis = analyse(inputs.fabric, policy, settings.max_tiers)
    analysis.findings += notes
    wants_blocks = settings.format != PLUGIN_TREE or settings.filter_dir
    # before the blocks: kept nodes are in them
    tracked = _track(settings, inputs, analysis, bool(wants_blocks), policy.slurm_nodes)
    if tracked is not None:
        blocks = tracked.blocks if wants_blocks else None
    else:
        blocks = choose_blocks(settings, inputs, analysis, version) if wants_blocks else None
    shown = blocks if settings.format != PLUGIN_TREE else None
    facts = None
    if settings.filter_dir:
        facts, filter_findings = _filter_facts(settings, inputs, analysis, blocks)
        analysis.findings += filter_findings
        for finding in filter_findings:
            warn(f"[{finding.kind}] {finding.subject}: {finding.message}")
    # the report folds every leaf's hostlist again: render it only when someone reads it
    report = ""
    if settings.report:
        from topograph_slurm.render.report import render_report

        changes = tracked.changes if tracked else None
        report = render_report(env, analysis, shown, settings.report_format, changes)
        if settings.report.lower().endswith((".html", ".htm")):
            report = _report_page(env, report, analysis, shown)
    out = Generated(None, report, analysis=analysis, tracked=tracked)
    out.node_count = _placed(settings.format, analysis, blocks)
    if out.node_count == 0:
        return out
    if settings.format == "yaml":
        out.topology, out.partition_lines = _yaml(env, settings, inputs, analysis, blocks, version)
    else:
        from topograph_slurm.render.topology_yaml import check_names

        check_names(analysis.tree if settings.format == PLUGIN_TREE else None, shown)
        out.topology = render(
            env,
            TEMPLATES[settings.format],
            tree=analysis.tree,
            blocks=blocks,
            node_count=out.node_count,
        )
    if facts is not None:
        from topograph_slurm.render.filters import render_filters

        out.filters = render_filters(facts, env)
    return out
