"""The fabric as ``explain`` and ``order`` see it: every node's place (node, NVLink domain or
block, leaf, spine levels, island), and what the fabric knows about the links between them.

It comes from one of three places. A fabric source (``--sim``, ``--ibnetdiscover``,
``--snapshot``, ``--ufm``) is analysed as ``generate`` would analyse it: the tree gives leaves
and spines, a snapshot's NVLink domains give the domain level, and the links give rates and
health. A topology file Slurm runs (``--topology topology.conf|topology.yaml``) gives the places
only: no rates, no health; so does the topology slurmctld runs (``scontrol show topology``),
the default for a job id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from topograph_slurm.analysis.nvlink.gpus import typical_gpus
from topograph_slurm.analysis.placement.explain import PathFacts, path_facts
from topograph_slurm.analysis.placement.span import fabric_map
from topograph_slurm.app.fabric import (
    AnalysedFabric,
    Warn,
    given_sources,
    kept_source,
    read_fabric,
    read_kept,
    sim_spec,
    source_stamp,
)
from topograph_slurm.config import Settings
from topograph_slurm.errors import UsageError
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.model.placement import FabricMap
from topograph_slurm.model.result import Analysis, BlockTopology, Finding, Tree
from topograph_slurm.slurm.scontrol import Scontrol

if TYPE_CHECKING:
    from topograph_slurm.sources.fabric_index import FabricIndex


@dataclass(slots=True)
class FabricView:
    """Places, the path facts when a fabric was read, GPUs per node when it says, each node's
    ``nvidia-smi topo -m`` when a snapshot has it (the NVLink a benchmark expects), and the
    tree, the blocks Slurm gets (NVLink domains, else IB units), the analysis and the findings
    beyond it that they came from (for ``draw``)."""

    fmap: FabricMap
    facts: PathFacts | None = None
    gpus_per_node: int = 0
    topologies: dict[str, GpuTopology] = field(default_factory=dict)
    tree: Tree | None = None
    blocks: BlockTopology | None = None
    analysis: Analysis | None = None
    findings: list[Finding] = field(default_factory=list)


def from_settings(
    settings: Settings,
    topology: str | None,
    warn: Warn,
    running: bool = False,
    facts: bool = True,
    kept: bool = True,
) -> FabricView:
    """A view from the one fabric source or topology file *settings* and *topology* name;
    with neither, the *running* Slurm's topology (for a job id) or a usage error. A fabric
    source's view comes from its kept index when that stands for the source now (*kept*:
    the caller needs no more than places and path facts; :func:`from_kept`), else from a
    fresh analysis. Without *facts* a fresh analysis' path facts are not computed (the
    fabric picture places its faults itself; the facts cost a pass over every link)."""
    sources = given_sources(settings)
    if topology and sources:
        raise UsageError(f"give --topology or --{sources[0]}, not both")
    if topology:
        return from_topology_file(Path(topology))
    if sources:
        view = from_kept(settings, warn) if kept else None
        return view or from_fabric(read_fabric(settings, warn), settings, facts)
    if running:
        return from_running_slurm(Scontrol.from_settings(settings))
    raise UsageError(
        "say where the fabric is: --topology FILE, or a fabric source "
        "(--sim, --ibnetdiscover, --snapshot, --ufm, --netq)"
    )


def from_fabric(fabric: AnalysedFabric, settings: Settings, facts: bool = True) -> FabricView:
    """The analysed fabric's places: node, NVLink domain (when the snapshot has them), leaf,
    spines; its path facts, GPUs per node and each node's ``topo -m``."""
    snapshot = fabric.inputs.snapshot
    topologies = snapshot.topologies if snapshot else _sim_topologies(settings)
    node_gpus = {name: topology.gpu_count for name, topology in topologies.items()}
    extra = fabric.extra_findings
    found = path_facts(fabric.analysis, extra, nvlink_domains=fabric.nvlink) if facts else None
    if found is not None and topologies and all(t.vendor == "amd" for t in topologies.values()):
        found.node_link = "xGMI/PCIe"  # AMD nodes: the node's fast links are Infinity Fabric
    return FabricView(
        fabric_map(fabric.tree, fabric.domains, fabric.source),
        found,
        typical_gpus(node_gpus) or _sim_gpus(settings),
        topologies,
        fabric.tree,
        fabric.blocks,
        fabric.analysis,
        extra,
    )


def from_kept(settings: Settings, warn: Warn) -> FabricView | None:
    """The places and path facts of the settings' fabric source from the index ``generate``
    kept (:func:`~topograph_slurm.app.fabric.read_kept`); None when there is none that
    stands for the source now."""
    index = read_kept(settings, warn)
    if index is None:
        return None
    from topograph_slurm.analysis.placement.index import fabric_map_of, path_facts_of

    fmap = fabric_map_of(index)
    if settings.ibnetdiscover:  # the dump as this command names it (one file, many spellings)
        fmap.source = settings.ibnetdiscover
    return FabricView(fmap, path_facts_of(index), index.gpus_per_node)


def kept_index(fabric: AnalysedFabric, settings: Settings) -> FabricIndex | None:
    """The index to keep of an analysed fabric (None: its source is not kept, see
    :func:`~topograph_slurm.app.fabric.kept_source`): its view's places and path facts."""
    source = kept_source(settings)
    if source is None:
        return None
    from topograph_slurm.analysis.placement.index import build_index

    view = from_fabric(fabric, settings)
    assert view.facts is not None
    return build_index(view.fmap, view.facts, view.gpus_per_node, source_stamp(settings, source))


def _sim_topologies(settings: Settings) -> dict[str, GpuTopology]:
    """A ``--sim …,gpu=mi300x`` fabric's nodes, each with the GPU topology its simulated
    ``rocm-smi --showtopo`` reads to (one parsed topology, shared); none without ``gpu=``."""
    if not settings.sim:
        return {}
    from topograph_slurm.sources import sim
    from topograph_slurm.sources.rocm_smi import parse_showtopo

    spec = sim.parse_sim_spec(sim_spec(settings.sim))
    if not spec.gpu:
        return {}
    topology = parse_showtopo(sim.generate_showtopo(spec))
    return {spec.node_name(i): topology for i in range(spec.nodes)}


def _sim_gpus(settings: Settings) -> int:
    if not settings.sim:
        return 0
    from topograph_slurm.sources import sim

    return sim.parse_sim_spec(sim_spec(settings.sim)).gpus


def from_topology_file(path: Path) -> FabricView:
    """Places from a topology.conf or topology.yaml that Slurm runs (blocks, or a tree)."""
    from topograph_slurm.sources.layout import load_topology

    topology = load_topology(path)
    return FabricView(
        fabric_map(topology.tree, topology.blocks, str(path)),
        tree=topology.tree,
        blocks=topology.blocks,
    )


def from_running_slurm(scontrol: Scontrol) -> FabricView:
    """Places from the topology slurmctld runs (``scontrol show topology``)."""
    from topograph_slurm.slurm.topology import scontrol_topology

    topology = scontrol_topology(scontrol)
    return FabricView(
        fabric_map(topology.tree, topology.blocks, "scontrol show topology"),
        tree=topology.tree,
        blocks=topology.blocks,
    )
