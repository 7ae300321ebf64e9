"""The one analysed fabric every command reads: :func:`read_fabric`.

A command names one fabric source (a dump, UFM, a snapshot, a simulation, or the live
``ibnetdiscover``); this module reads it, runs the pure analysis with the settings' naming and
tier limit, and forms both kinds of block once: the InfiniBand scalable units (one per logical
leaf) and, when a snapshot has GPU fabric data (or ``--block-source nvlink`` asks), the NVLink
domains. :class:`AnalysedFabric` carries them as separate fields with the findings merged by
one rule, so ``generate``, ``health``, ``explain``/``order``, ``bench``, ``diff`` and ``draw``
pick the field they mean instead of each assembling its own fabric.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from topograph_slurm.analysis.fabric.naming import NamingPolicy, compile_hcas, compile_rewrites
from topograph_slurm.config import Settings
from topograph_slurm.errors import InputError, UsageError
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.result import Analysis, BlockTopology, Finding, MadeWith, Tree
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.slurm import auto as slurm_auto
from topograph_slurm.sources.gc_pause import no_cyclic_gc
from topograph_slurm.sources.node_name_map import load_node_name_map

# UFM's HTTP stack, snapshots and NVLink are imported where they are used: `generate` from
# cron stays cheap; so are the ibnetdiscover parser and the analysis, which a command reading
# a topology file or the kept index (occupancy, explain, ...) never runs.
if TYPE_CHECKING:
    from topograph_slurm.model.nvlink_partition import NvlinkInventory
    from topograph_slurm.sources import ufm
    from topograph_slurm.sources.fabric_index import FabricIndex, Stamp
    from topograph_slurm.sources.snapshot import Snapshot

Warn = Callable[[str], None]
#: ``--sim demo``: a small DGX SuperPOD-like fabric (4 scalable units of 8 nodes, 8 rails).
DEMO_SIM = "nodes=32,gpus=8,rails=8,su=8,tiers=2,sharp=1"
#: The fabric sources, as Settings names them.
FABRIC_SOURCES = ("ibnetdiscover", "sim", "ufm", "netq", "snapshot")
#: How long the kept index of a live source (UFM) stands for it: two
#: of the hourly runs the unit files schedule, so one late or failed run does not matter.
LIVE_INDEX_SECONDS = 2 * 3600
#: The kept-index sources that are appliances asked live (their index ages out).
LIVE_SOURCES = ("ufm:", "netq:")
#: The settings an analysis for the job-scoped commands depends on (the kept index is stale
#: when one of them differs from the run that kept it).
_ANALYSIS_SETTINGS = (
    "rewrites",
    "hcas",
    "node_name_map",
    "slurm_nodes",
    "max_tiers",
    "slurm_version",
    "block_sizes",
    "block_source",
    "nmx",
)


@dataclass(slots=True)
class Inputs:
    """What the sources delivered: the fabric (possibly empty), an optional snapshot, and
    the source's own findings."""

    fabric: Fabric
    snapshot: Snapshot | None = None
    #: what the source found beside the fabric (LLDP: unreadable nodes, the unknown tiers)
    findings: list[Finding] = field(default_factory=list)
    #: NMX's NVLink racks and partitions (``--nmx``, or a ``--sim`` with ``nvl``)
    nmx: NvlinkInventory | None = None


@dataclass(slots=True)
class AnalysedFabric:
    """One fabric, read and analysed once: the IB analysis (tree, hosts, exclusions, its
    findings), the IB unit blocks, the NVLink domains when there are GPU facts, the release
    the blocks were formed for, and where the ``auto`` node list and release came from."""

    #: the settings it was read with, ``slurm_version: auto`` resolved
    settings: Settings
    inputs: Inputs
    analysis: Analysis
    #: IB scalable-unit blocks, one per logical leaf in adjacency order (None: no node placed)
    units: BlockTopology | None
    #: NVLink domains as blocks (None: no GPU fabric data, or not asked for)
    domains: BlockTopology | None
    #: whether Slurm's blocks are NVLink domains (asked for, or GPU fabric data in the
    #: snapshot); with ``--block-source nvlink`` and no GPU data there are none to form
    nvlink: bool
    #: where the ``auto`` node list and release came from (info or problem findings)
    notes: list[Finding] = field(default_factory=list)
    #: the release and the node list's origin, as the topology file's header names them
    made: MadeWith = field(default_factory=MadeWith)

    @property
    def version(self) -> SlurmVersion:
        """The release the blocks were formed for."""
        return SlurmVersion.parse(self.settings.slurm_version)

    @property
    def tree(self) -> Tree | None:
        """The switch tree, None when no host became a node."""
        return self.analysis.tree if self.analysis.node_count else None

    @property
    def blocks(self) -> BlockTopology | None:
        """The blocks Slurm gets: the NVLink domains when they are asked for or the snapshot
        has GPU fabric data, else the IB units."""
        return self.domains if self.nvlink else self.units

    @property
    def extra_findings(self) -> list[Finding]:
        """The findings beyond the IB analysis': the blocks' and the snapshot's (NVLink
        blocks carry the snapshot's already)."""
        blocks = self.blocks
        found = list(blocks.findings) if blocks else []
        snapshot = self.inputs.snapshot
        if snapshot is not None and self.domains is None:
            found += snapshot.findings
        return found

    @property
    def findings(self) -> list[Finding]:
        """Every finding about this fabric: the analysis', the blocks', the snapshot's."""
        return [*self.analysis.findings, *self.extra_findings]

    @property
    def source(self) -> str:
        return self.inputs.fabric.source


def read_fabric(
    settings: Settings,
    warn: Warn,
    *,
    before_blocks: Callable[[Analysis, frozenset[str] | None], None] | None = None,
    blocks_needed: bool = True,
    unit: int = 0,
) -> AnalysedFabric:
    """Read the settings' one fabric source and analyse it, with cyclic GC paused
    (:mod:`topograph_slurm.sources.gc_pause`). *before_blocks* sees the analysis and the
    nodes Slurm lists before blocks are formed from its tree (``generate``'s keep-missing
    step puts kept nodes back there); without *blocks_needed*, NVLink domains that cannot be
    formed (``--block-source nvlink`` without GPU data) are None instead of failing the run.
    *unit* is the IB unit size earlier runs saw (0: unknown), the least inferred base."""
    from topograph_slurm.analysis.fabric.analyse import analyse, ib_blocks

    notes: list[Finding] = []
    made = MadeWith()
    settings = slurm_auto.resolve_version(settings, notes, made)
    version = SlurmVersion.parse(settings.slurm_version)
    with no_cyclic_gc():
        inputs = load_inputs(settings, warn)
        policy = naming_policy(settings, notes, made)  # asks Slurm for its nodes once per run
        analysis = analyse(inputs.fabric, policy, settings.max_tiers)
        analysis.findings += inputs.findings
        if inputs.snapshot is not None:
            analysis.findings += gpu_affinity(inputs.snapshot)
        if before_blocks is not None:
            before_blocks(analysis, policy.slurm_nodes)
        units = (
            ib_blocks(analysis, version, settings.block_sizes, unit)
            if analysis.node_count
            else None
        )
        nvlink = settings.block_source == "nvlink"  # what was asked, if it cannot be had
        domains: BlockTopology | None
        try:
            if inputs.nmx is not None and settings.block_source != "ib":
                nvlink, domains = True, partition_blocks(settings, inputs.nmx, analysis, version)
            else:
                nvlink = wants_nvlink(settings, inputs.snapshot, analysis.findings)
                domains = nvlink_domains(settings, inputs, analysis, version) if nvlink else None
        except InputError:
            if blocks_needed:
                raise
            domains = None
    return AnalysedFabric(settings, inputs, analysis, units, domains, nvlink, notes, made)


def read_text(path: str) -> str:
    """A dump file, or stdin for ``-``, decoded leniently (dumps carry stray bytes)."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None
    return data.decode("utf-8", errors="replace")


def fetch_options(settings: Settings, ca_bundle: str | None, insecure: bool) -> ufm.FetchOptions:
    """How to reach an appliance (UFM, NetQ): its own TLS settings, UFM's time limits and
    size cap (one set of them for both)."""
    from topograph_slurm.sources import ufm

    return ufm.FetchOptions(
        ca_bundle=Path(ca_bundle) if ca_bundle else None,
        insecure=insecure,
        timeout=settings.ufm_timeout,
        deadline=settings.ufm_deadline,
        max_bytes=settings.ufm_max_response_mib * ufm.MIB,
    )


def fetch_ufm(settings: Settings, warn: Warn) -> ufm.UfmResponses:
    """Ask UFM for the fabric (credentials from a file or the environment, never argv)."""
    from topograph_slurm.sources import ufm

    assert settings.ufm is not None
    options = fetch_options(settings, settings.ufm_ca_bundle, settings.ufm_insecure)
    credentials = Path(settings.ufm_credentials) if settings.ufm_credentials else None
    return ufm.collect_ufm(settings.ufm, credentials, options, env=os.environ, warn=warn)


def fetch_netq(settings: Settings, warn: Warn) -> Fabric:
    """Ask NetQ for the Ethernet fabric (credentials as UFM's; UFM's timeouts and size cap)."""
    from topograph_slurm.sources import netq

    assert settings.netq is not None
    options = fetch_options(settings, settings.netq_ca_bundle, settings.netq_insecure)
    credentials = Path(settings.netq_credentials) if settings.netq_credentials else None
    answer = netq.collect_netq(settings.netq, credentials, options, env=os.environ, warn=warn)
    return netq.fabric_from_netq(answer.graphs, source=answer.url)


def fetch_nmx(settings: Settings, warn: Warn) -> NvlinkInventory:
    """Ask NMX for the NVLink racks and partitions (credentials as UFM's; UFM's timeouts and
    size cap), read only."""
    from topograph_slurm.sources import nmx

    assert settings.nmx is not None
    options = fetch_options(settings, settings.nmx_ca_bundle, settings.nmx_insecure)
    credentials = Path(settings.nmx_credentials) if settings.nmx_credentials else None
    answer = nmx.collect_nmx(settings.nmx, credentials, options, env=os.environ, warn=warn)
    return nmx.inventory_from_nmx(
        answer.compute_nodes, answer.gpus, answer.partitions, source=answer.url
    )


def nvlink_inventory(settings: Settings, warn: Warn) -> NvlinkInventory | None:
    """NMX's racks and partitions: asked (``--nmx``), simulated (``--sim …,nvl=72``), or none."""
    if settings.nmx:
        return fetch_nmx(settings, warn)
    if settings.sim:
        from topograph_slurm.sources import nmx, sim

        spec = sim.parse_sim_spec(sim_spec(settings.sim))
        if spec.nvl:
            return nmx.inventory_from_nmx(*sim.generate_nmx(spec), source=f"sim:{settings.sim}")
    return None


def _snapshot_fabric(path: Path, snapshot: Snapshot) -> Inputs:
    """The fabric stored in a snapshot: UFM answers, else ibnetdiscover text, else the
    nodes' LLDP (the leaf layer of an Ethernet fabric), else none."""
    from topograph_slurm.sources import ibnetdiscover, ufm

    if ufm.has_snapshot(path):
        return Inputs(ufm.fabric_from_ufm(ufm.load_responses(path), source=str(path)), snapshot)
    if snapshot.ibnetdiscover is not None:
        source = str(path / "fabric" / "ibnetdiscover.txt")
        return Inputs(ibnetdiscover.parse_ibnetdiscover(snapshot.ibnetdiscover, source), snapshot)
    from topograph_slurm.sources import lldp
    from topograph_slurm.sources.snapshot import node_outputs

    outputs = node_outputs(snapshot, lldp.KEY_LLDP)
    if outputs:
        fabric, findings = lldp.fabric_from_lldp(outputs, str(path / "nodes"))
        return Inputs(fabric, snapshot, findings)
    return Inputs(Fabric(source=str(path)), snapshot)


def given_sources(settings: Settings) -> list[str]:
    """The fabric sources *settings* name (a usage error when more than one)."""
    given = [key for key in FABRIC_SOURCES if getattr(settings, key)]
    if len(given) > 1:
        names = " and ".join("--" + key for key in given)
        raise UsageError(f"give one fabric source, not {names}")
    return given


def load_inputs(settings: Settings, warn: Warn) -> Inputs:
    """Exactly one fabric source (dump, UFM, NetQ, snapshot, simulation, or the live
    ibnetdiscover), and NMX's NVLink racks beside it when there are any."""
    given_sources(settings)
    inputs = _fabric_inputs(settings, warn)
    inputs.nmx = nvlink_inventory(settings, warn)
    return inputs


def _fabric_inputs(settings: Settings, warn: Warn) -> Inputs:
    """The one fabric source's inputs."""
    from topograph_slurm.sources import ibnetdiscover

    if settings.snapshot:
        from topograph_slurm.sources.snapshot import load_snapshot

        path = Path(settings.snapshot)
        snapshot = load_snapshot(path)
        return _snapshot_fabric(path, snapshot)
    if settings.ufm:
        from topograph_slurm.sources import ufm

        return Inputs(ufm.fabric_from_ufm(fetch_ufm(settings, warn)))
    if settings.netq:
        return Inputs(fetch_netq(settings, warn))
    if settings.sim:
        from topograph_slurm.sources import sim

        spec, source = sim.parse_sim_spec(sim_spec(settings.sim)), f"sim:{sim_spec(settings.sim)}"
        if spec.fabric == "roce":
            from topograph_slurm.sources import netq

            return Inputs(netq.fabric_from_netq([sim.generate_netq(spec)], source))
        return Inputs(ibnetdiscover.parse_ibnetdiscover(sim.generate_ibnetdiscover(spec), source))
    if settings.ibnetdiscover:
        source = "<stdin>" if settings.ibnetdiscover == "-" else settings.ibnetdiscover
        text = read_text(settings.ibnetdiscover)
        return Inputs(ibnetdiscover.parse_ibnetdiscover(text, source))
    command = settings.ibnetdiscover_command
    text = ibnetdiscover.run_ibnetdiscover(command.binary, command.args, command.timeout)
    return Inputs(ibnetdiscover.parse_ibnetdiscover(text, command.binary))


def sim_spec(value: str) -> str:
    """A ``--sim`` value as a simulation spec (``demo`` is :data:`DEMO_SIM`)."""
    return DEMO_SIM if value == "demo" else value


def naming_policy(
    settings: Settings, notes: list[Finding] | None = None, made: MadeWith | None = None
) -> NamingPolicy:
    """Node-name map, rewrites, the HCA selection and the Slurm node list from settings;
    *notes* gets the finding that says where an ``auto`` node list came from, *made* its
    origin in the topology header's words."""
    policy = NamingPolicy(
        rewrites=compile_rewrites((rule.pattern, rule.replace) for rule in settings.rewrites),
        hcas=compile_hcas(settings.hcas),
    )
    if settings.node_name_map:
        policy.node_name_map = load_node_name_map(Path(settings.node_name_map))
    policy.slurm_nodes = slurm_auto.node_list(settings, [] if notes is None else notes, made)
    return policy


def gpu_affinity(snapshot: Snapshot) -> list[Finding]:
    """The snapshot's GPU↔NIC affinity findings and the nodes whose GPU layout differs from
    their type's (gres.conf would give them lines of their own), with the fabric's: every use
    case that reads the fabric (generate's report, health, draw) sees them once."""
    from topograph_slurm.analysis.nvlink.affinity import affinity_findings
    from topograph_slurm.app.gres import layout_findings

    return affinity_findings(snapshot.topologies) + layout_findings(snapshot)


def wants_nvlink(settings: Settings, snapshot: Snapshot | None, findings: list[Finding]) -> bool:
    """Blocks from NVLink domains when asked, or (auto) when a snapshot's GPUs name a
    multi-node NVLink domain; an auto run whose GPUs name none (HGX, PCIe GPUs) takes the IB
    units and adds to *findings* why, with the nodes' NVLink findings health acts on."""
    from topograph_slurm.analysis.nvlink.domains import ib_decides, names_multi_node

    has_gpus = snapshot is not None and any(n.gpus for n in snapshot.nodes.values())
    if settings.block_source == "nvlink" and not has_gpus:
        raise InputError("--block-source nvlink needs a --snapshot with nvidia-smi output")
    if snapshot is None or not has_gpus or settings.block_source == "ib":
        return False
    if names_multi_node(snapshot.gpus):
        return True
    if settings.block_source == "nvlink":
        raise InputError(
            "--block-source nvlink: no GPU names a multi-node NVLink domain (all-zero or no "
            "ClusterUUID): there are no NVLink blocks; use the IB units (auto or ib)"
        )
    if settings.block_source == "auto":
        findings += ib_decides(snapshot.gpus)
    return False


def nvlink_domains(
    settings: Settings, inputs: Inputs, analysis: Analysis, version: SlurmVersion
) -> BlockTopology:
    """NVLink-domain blocks, ordered by the IB tree when there is one."""
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


def partition_blocks(
    settings: Settings, inventory: NvlinkInventory, analysis: Analysis, version: SlurmVersion
) -> BlockTopology:
    """NMX's partitions in their racks as blocks, racks ordered by the IB tree when there is one."""
    from topograph_slurm.analysis.nvlink.domains import NvlinkPolicy
    from topograph_slurm.analysis.nvlink.partitions import nmx_blocks

    return nmx_blocks(
        inventory,
        version,
        policy=NvlinkPolicy(settings.nvlink_unhealthy, settings.block_name_pattern),
        block_sizes=settings.block_sizes,
        tree=analysis.tree if analysis.node_count else None,
    )


def node_domains(fabric: AnalysedFabric) -> dict[str, str] | None:
    """Each node's NVLink domain when the blocks are NVLink domains (NMX's DomainUUID, or
    the GPUs' ClusterUUID.CliqueId)."""
    if fabric.inputs.nmx is not None and fabric.nvlink:
        return {tray.name: tray.domain for tray in fabric.inputs.nmx.trays}
    snapshot = fabric.inputs.snapshot
    if snapshot is None or not fabric.nvlink:
        return None
    from topograph_slurm.analysis.nvlink.clique import domain_results

    results = domain_results(snapshot.gpus)
    return {node: result.domain_id or "" for node, result in results.items()}


# --------------------------------------------------------------------------- the kept index


def kept_source(settings: Settings) -> str | None:
    """The identity of the settings' fabric source as the kept index is named by it; None
    for a source whose index is not kept: stdin, a snapshot (its ``topo -m`` per node, which
    ``order``'s binding formats read, is not in the index) and the live ``ibnetdiscover``
    (no job-scoped command reads it: without a source they read the topology Slurm runs)."""
    base = _kept_base(settings)
    return f"{base}+nmx:{settings.nmx}" if base and settings.nmx else base


def _kept_base(settings: Settings) -> str | None:
    """The fabric source's part of :func:`kept_source`."""
    if settings.snapshot or settings.ibnetdiscover == "-":
        return None
    if settings.ibnetdiscover:
        return f"ibnetdiscover:{os.path.realpath(settings.ibnetdiscover)}"
    if settings.sim:
        return f"sim:{sim_spec(settings.sim)}"
    if settings.ufm:
        return f"ufm:{settings.ufm}"
    if settings.netq:
        return f"netq:{settings.netq}"
    return None  # the live ibnetdiscover: a job-scoped command without a source reads Slurm's


def source_stamp(settings: Settings, source: str) -> Stamp:
    """What *source* is now: a dump file's identity and times, the settings' digest, this
    release, the time."""
    from topograph_slurm import __version__
    from topograph_slurm.sources.fabric_index import Stamp

    return Stamp(
        source, _file_stamp(settings), _settings_digest(settings), __version__, time.time()
    )


def _file_stamp(settings: Settings) -> tuple[int, ...]:
    """A dump file's (device, inode, size, mtime_ns, ctime_ns); empty for any other source
    or a file that is not there (the analysis then says why)."""
    if not settings.ibnetdiscover:
        return ()
    try:
        st = os.stat(settings.ibnetdiscover)
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _settings_digest(settings: Settings) -> str:
    """A digest of the settings the analysis depends on, a node-name map's file stamp too."""
    given = {name: getattr(settings, name) for name in _ANALYSIS_SETTINGS}
    given["rewrites"] = [(rule.pattern, rule.replace) for rule in settings.rewrites]
    if settings.node_name_map:
        try:
            st = os.stat(settings.node_name_map)
            given["node_name_map_file"] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        except OSError:
            pass
    text = json.dumps(given, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def stale_because(kept: Stamp, now: Stamp) -> str | None:
    """Why the kept index no longer stands for the source (None: it does): the dump file
    changed, the settings or the release differ, an appliance's (UFM, NetQ) index is too old."""
    if kept.source != now.source:
        return "it was kept for another source"
    if kept.release != now.release:
        return f"release {kept.release} kept it, this is {now.release}"
    if kept.settings != now.settings:
        return "the analysis settings differ"
    if kept.file != now.file:
        return "the dump file changed since"
    if now.source.startswith(LIVE_SOURCES) or "+nmx:" in now.source:
        age = now.analysed - kept.analysed
        if not 0 <= age <= LIVE_INDEX_SECONDS:
            return f"it was fetched {age / 3600:.1f} h ago (at most {LIVE_INDEX_SECONDS // 3600} h)"
    return None


def read_kept(settings: Settings, warn: Warn) -> FabricIndex | None:
    """The kept index of the settings' fabric source when it stands for the source now;
    None (a fresh analysis then) when none is kept, and with a warning saying why when the
    kept one is stale or unreadable."""
    from topograph_slurm.config import state_dir
    from topograph_slurm.sources.fabric_index import index_path, load_index

    source = kept_source(settings)
    if source is None:
        return None
    path = index_path(state_dir(settings), source)
    try:
        index = load_index(path)
    except InputError as err:
        warn(f"kept fabric index not used, analysing afresh: {err}")
        return None
    if index is None:
        return None
    why = stale_because(index.stamp, source_stamp(settings, source))
    if why:
        warn(f"kept fabric index {path} is stale ({why}): analysing afresh")
        return None
    return index
