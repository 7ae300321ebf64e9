"""The one catalogue of finding kinds: each kind's stable text, its level, what ``health`` makes
of it, and what it means. ``docs/findings.md`` lists the same table (a test keeps them equal).

A kind is a :class:`FindingKind` member, a ``str``: it compares equal to its text and is
written as it in reports, JSON, metrics and ``bench.json``. A :class:`Finding` made of a kind
carries the kind's level unless the producer names one of the kind's other ``levels``.

What ``health`` makes of a kind (``severity``, or why it is ignored):

- **drain**: a job placed on the node fails or cannot get what it asked for.
- **degraded**: jobs run, slower, so the node gets a higher Weight and is allocated last.
- **unknown**: the node was not read, which is no evidence either way, so whatever it carries
  now stays until it is read again.
- **ignored** (:class:`Ignored`, its reason shown beside the finding, never a verdict): a fact
  about the fabric's layout, a partition or the run, a healthy configuration, a node off the
  fabric, or a finding whose cause is a finding of its own.

Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from topograph_slurm.model.health import DEGRADED, DRAIN, UNKNOWN
from topograph_slurm.model.result import LEVEL_INFO, LEVEL_PROBLEM


@dataclass(frozen=True, slots=True)
class Ignored:
    """``health`` makes no verdict of a kind's findings: *why* is what it shows beside them."""

    why: str


#: A kind's levels, the usual one first (the level a finding of it carries unless its
#: producer says otherwise).
PROBLEM = (LEVEL_PROBLEM,)
INFO = (LEVEL_INFO,)
PROBLEM_OR_INFO = (LEVEL_PROBLEM, LEVEL_INFO)
INFO_OR_PROBLEM = (LEVEL_INFO, LEVEL_PROBLEM)

LAYOUT = Ignored("a fact about the fabric's layout, not one node's health")
PARTITION = Ignored("a fact about a partition, not one node")
CONFIG = Ignored("a healthy configuration")
NO_DOMAIN = Ignored("a healthy configuration (no multi-node NVLink domain)")
OWN_CAUSE = Ignored("its cause is a finding of its own")
OFF_FABRIC = Ignored("the node is off the fabric: it is judged when it is back")
RUN = Ignored("a fact about this run, not a node's health")
JOB_RECORD = Ignored("a fact about a job's record, not a node's health")
TASK = Ignored("a fact about one job's task binding, not the node's health")


class FindingKind(StrEnum):
    """Every kind a finding can have. A member's name is its text upper-cased, ``-`` as ``_``."""

    levels: tuple[str, ...]
    level: str  # the usual one, levels[0]: what a finding carries unless its producer says
    severity: str | None
    ignored: str
    meaning: str

    def __new__(
        cls, text: str, levels: tuple[str, ...], health: str | Ignored, meaning: str
    ) -> FindingKind:
        member = str.__new__(cls, text)
        member._value_ = text
        member.levels = levels
        member.level = levels[0]
        member.severity = None if isinstance(health, Ignored) else health
        member.ignored = health.why if isinstance(health, Ignored) else ""
        member.meaning = meaning
        return member

    # InfiniBand fabric (analysis/fabric, analysis/fabric/degraded_links.py)
    DEGRADED_LINK = (
        "degraded-link",
        PROBLEM,
        DEGRADED,
        "a cable trained below the fabric's norm (fewer lanes or a lower speed); "
        "names the nodes whose traffic crosses it",
    )
    MISSING_RAIL = (
        "missing-rail",
        PROBLEM,
        DRAIN,
        "a node has fewer connected HCAs than its leaf peers: NCCL's ranks there run on fewer "
        "HCAs or refuse the topology (NHC's check_hw_ib drains such a node too)",
    )
    ISLANDS = (
        "islands",
        PROBLEM,
        LAYOUT,
        "the fabric has parts no cable joins; Slurm places no job across them",
    )
    RAIL_DISAGREEMENT = (
        "rail-disagreement",
        PROBLEM,
        DEGRADED,
        "a node's rails reach different logical leaves (a moved cable): one rail's traffic "
        "crosses the spine",
    )
    RAIL_MISALIGNED = (
        "rail-misaligned",
        PROBLEM,
        DEGRADED,
        "inside a rail-optimised unit a node's HCA sits on another rail's leaf (two cables "
        "swapped between the unit's rail leaves): its rail-aligned collectives cross rails at "
        "the spine, though leaves and blocks are unchanged",
    )
    TIERS_UNKNOWN = (
        "tiers-unknown",
        INFO,
        LAYOUT,
        "the fabric source shows the leaves only (LLDP from the hosts): the tiers above are "
        "unknown, not absent, so the leaves read as unjoined; NetQ or switch-side LLDP show them",
    )
    SPLIT_SUBNETS = (
        "split-subnets",
        PROBLEM,
        LAYOUT,
        "nodes have HCAs on subnets no cable joins; the subnet with most of each node's HCAs "
        "is kept, the other HCAs are excluded",
    )
    UNDERSIZED_BLOCK = (
        "undersized-block",
        PROBLEM,
        LAYOUT,
        "a block smaller than the base block size, left out because the Slurm release "
        "rejects undersized blocks (25.05+ keeps them)",
    )
    BLOCK_BASE_BELOW_UNIT = (
        "block-base-below-unit",
        INFO,
        LAYOUT,
        "the inferred BlockSizes base is below the unit size because short blocks hold many "
        "nodes; says which job sizes cannot stay in one block",
    )
    # NVLink: a node's GPUs' fabric registration (analysis/nvlink/clique.py)
    NO_GPUS = (
        "no-gpus",
        PROBLEM,
        DRAIN,
        "no GPUs reported (they fell off the bus): a job asking for the node's GPUs fails",
    )
    FABRIC_NA = (
        "fabric-na",
        PROBLEM,
        NO_DOMAIN,
        "no GPU reports NVLink fabric information: the node is in no multi-node NVLink "
        "domain (how HGX systems are built)",
    )
    FABRIC_PARTIAL = (
        "fabric-partial",
        PROBLEM,
        DRAIN,
        "some GPUs report fabric State N/A while others are registered: they are not in the "
        "rack's NVLink domain, so a multi-node NVLink job fails",
    )
    FABRIC_NOT_COMPLETED = (
        "fabric-not-completed",
        PROBLEM,
        DRAIN,
        "a GPU's fabric State is not Completed (registration unfinished or failed): a "
        "multi-node NVLink job fails at NCCL/IMEX initialisation",
    )
    FABRIC_STATUS = (
        "fabric-status",
        PROBLEM,
        DRAIN,
        "a registered GPU's fabric Status is not Success: it is not in the rack's NVLink domain",
    )
    FABRIC_UNHEALTHY = (
        "fabric-unhealthy",
        PROBLEM,
        DEGRADED,
        "registered, but the driver reports reduced bandwidth or a route unhealthy or in recovery",
    )
    FABRIC_MISSING_ID = (
        "fabric-missing-id",
        PROBLEM,
        DRAIN,
        "a GPU's ClusterUUID or CliqueId is N/A while it is registered or other GPUs have "
        "theirs: it is not in the rack's NVLink domain",
    )
    FABRIC_DISAGREE = (
        "fabric-disagree",
        PROBLEM,
        DRAIN,
        "the node's GPUs name more than one NVLink domain (a node is one tray: one domain)",
    )
    GPU_COUNT_MISMATCH = (
        "gpu-count-mismatch",
        PROBLEM,
        DRAIN,
        "the node shows another GPU count than its NVLink domain's nodes usually have: "
        "usually a GPU fell off the bus",
    )
    SINGLE_NODE_NVSWITCH = (
        "single-node-nvswitch",
        INFO,
        CONFIG,
        "an all-zero ClusterUUID: a single-node NVSwitch system (HGX), not a multi-node "
        "NVLink domain",
    )
    FABRIC_STATE_NOT_COLLECTED = (
        "fabric-state-not-collected",
        INFO,
        CONFIG,
        "only ClusterUUID and CliqueId were collected: the NVLink domain is taken from them "
        "alone, registration and health are not judged",
    )
    BLOCK_SOURCE = (
        "block-source",
        INFO,
        RUN,
        "block source auto found no GPU naming a multi-node NVLink domain (all-zero "
        "ClusterUUID: single-node NVSwitch, or no fabric): the InfiniBand units are the blocks",
    )
    # NVLink: domains into blocks, GPUs per node (analysis/nvlink/domains.py, gpus.py)
    NVLINK_RACK_MISSING = (
        "nvlink-rack-missing",
        PROBLEM,
        LAYOUT,
        "a block of the previous layout has no NVLink domain now: kept empty on 25.05+, "
        "left out before (the blocks after it shift)",
    )
    NVLINK_RACK_NEW = (
        "nvlink-rack-new",
        PROBLEM,
        LAYOUT,
        "an NVLink domain the previous layout does not know, appended after the known blocks",
    )
    NVLINK_RACK_SPLIT = (
        "nvlink-rack-split",
        PROBLEM,
        LAYOUT,
        "a previous block's nodes are in more than one NVLink domain now; the others become "
        "a new block",
    )
    # NVLink partitions from NMX (analysis/nvlink/partitions.py)
    NVLINK_TRAY_DOWN = (
        "nvlink-tray-down",
        PROBLEM,
        DRAIN,
        "NMX reports a compute tray not healthy: it is left out of every NVLink block, and a "
        "multi-node NVLink job placed on it fails",
    )
    NVLINK_GPU_OUTSIDE_PARTITION = (
        "nvlink-gpu-outside-partition",
        PROBLEM,
        DRAIN,
        "a GPU of the tray is in no NMX partition of its split rack, in another partition than "
        "the tray's other GPUs, or not healthy: the tray cannot share NVLink with its "
        "partition and is left out of the blocks",
    )
    NVLINK_PARTITION_DEGRADED = (
        "nvlink-partition-degraded",
        PROBLEM,
        DEGRADED,
        "NMX reports an NVLink partition not healthy (reduced bandwidth or compute): its nodes "
        "run, slower",
    )
    NVLINK_PARTITIONS_UNEVEN = (
        "nvlink-partitions-uneven",
        PROBLEM,
        LAYOUT,
        "racks are split into NMX partitions of different counts or sizes: Slurm 24.11 (no "
        "empty blocks) gets the partitions as one block level, without the rack level",
    )
    NVLINK_INCLUDED_WITH_FINDINGS = (
        "nvlink-included-with-findings",
        PROBLEM,
        OWN_CAUSE,
        "a node with NVLink findings kept in the domain its GPUs name (unhealthy-node "
        "policy include)",
    )
    GPUS_PER_NODE_DISAGREE = (
        "gpus-per-node-disagree",
        PROBLEM,
        PARTITION,
        "nodes disagree on GPUs per node (nvidia-smi topo -m); the filters use one count "
        "unless the config sets gpus_per_node",
    )
    # gres.conf from topo -m (analysis/nvlink/gres.py)
    GRES_LAYOUT_DIFFERS = (
        "gres-layout-differs",
        PROBLEM,
        DEGRADED,
        "the node's GPUs (NUMA cores or NVLink links from nvidia-smi topo -m) differ from "
        "the other nodes of its type: gres.conf gives it lines of its own",
    )
    # AMD: a node's xGMI hive from rocm-smi --showtopo (analysis/nvlink/xgmi.py)
    XGMI_SPLIT = (
        "xgmi-split",
        PROBLEM,
        DEGRADED,
        "an AMD node's GPUs form more than one xGMI group (rocm-smi --showtopo): GPUs of "
        "different groups talk over PCIe, so a job across them is slower than on one hive",
    )
    XGMI_PCIE_ONLY = (
        "xgmi-pcie-only",
        PROBLEM,
        DEGRADED,
        "no two of an AMD node's GPUs are joined by xGMI (rocm-smi --showtopo): every GPU "
        "pair talks over PCIe (no Infinity Fabric bridge, or it is not detected)",
    )
    # GPU↔NIC affinity from topo -m (analysis/nvlink/affinity.py)
    GPU_NIC_FAR_NUMA = (
        "gpu-nic-far-numa",
        PROBLEM,
        DEGRADED,
        "a GPU's nearest NIC (nvidia-smi topo -m) sits with the GPUs of another NUMA node than "
        "the GPU's own NUMA affinity: its RDMA traffic crosses sockets",
    )
    GPU_NIC_SYS_ONLY = (
        "gpu-nic-sys-only",
        PROBLEM,
        DEGRADED,
        "a GPU has no NIC nearer than SYS (across the CPU interconnect) while other GPUs of "
        "the node have one (a node where every GPU is SYS from every NIC, GB200, has none)",
    )
    GPU_NIC_RAILS_UNEVEN = (
        "gpu-nic-rails-uneven",
        PROBLEM,
        DEGRADED,
        "the node's GPUs do not each have one nearest NIC of their own (nvidia-smi topo -m), "
        "while most nodes with its GPU count do: a NIC gone or shared",
    )
    # Collection: a snapshot's nodes (sources/snapshot.py)
    COLLECT_FAILED = (
        "collect-failed",
        PROBLEM,
        UNKNOWN,
        "a collection command failed on the node: not read, no evidence either way",
    )
    COLLECT_TIMEOUT = (
        "collect-timeout",
        PROBLEM,
        UNKNOWN,
        "a collection command timed out on the node: not read, no evidence either way",
    )
    COLLECT_MISSING = (
        "collect-missing",
        PROBLEM,
        UNKNOWN,
        "the snapshot holds no result, or no nvidia-smi fabric output, of the node: not read",
    )
    COLLECT_PARSE_ERROR = (
        "collect-parse-error",
        PROBLEM,
        UNKNOWN,
        "a collected output of the node could not be parsed: not read",
    )
    # Nodes absent from the sweep (analysis/state/keep_missing.py)
    KEPT_MISSING = (
        "kept-missing",
        INFO,
        OFF_FABRIC,
        "an absent node Slurm still lists keeps its last leaf and block, within --keep-missing",
    )
    KEPT_MISSING_EXPIRED = (
        "kept-missing-expired",
        PROBLEM,
        OFF_FABRIC,
        "an absent node was last seen longer ago than --keep-missing: dropped from the topology",
    )
    MISSING_NOT_KEPT = (
        "missing-not-kept",
        PROBLEM_OR_INFO,
        OFF_FABRIC,
        "an absent node may not keep its place (no place, last seen unknown): dropped; "
        "information when Slurm no longer lists it",
    )
    # Benchmarks (analysis/bench/judge.py); health weighs bench-drift whatever its level
    SLOW_NODE = (
        "slow-node",
        PROBLEM,
        DEGRADED,
        "measured slower than its level's median or its expected rate, alone or with every partner",
    )
    SLOW_LINK = (
        "slow-link",
        PROBLEM,
        DEGRADED,
        "a benchmark path (a pair's path or an uplink its pairs share) measured slow; names "
        "the nodes behind it",
    )
    BENCH_DRIFT = (
        "bench-drift",
        PROBLEM_OR_INFO,
        DEGRADED,
        "a level's median busbw moved beyond the drift threshold from the previous record: "
        "a problem when slower, information when faster",
    )
    # Where this run's inputs came from (slurm/auto.py, app/state.py)
    SLURM_NODES = (
        "slurm-nodes",
        INFO_OR_PROBLEM,
        RUN,
        "where the auto node list came from: Slurm's node table, or every host when Slurm "
        "did not answer (a problem when it is installed)",
    )
    SLURM_VERSION = (
        "slurm-version",
        INFO_OR_PROBLEM,
        RUN,
        "where the auto Slurm release came from: the installed one, or the fallback when "
        "Slurm did not answer (a problem when it is installed)",
    )
    RECORD_INCOMPLETE = (
        "record-incomplete",
        PROBLEM,
        RUN,
        "a job record or one of its node parts could not learn everything: it names what was "
        "missing (the job, the fabric, a bench record; a sysfs tree, a counter, the start "
        "record, nvidia-smi) and why; the hook wrote the rest and let the job run",
    )
    SUMMARY_UNREADABLE = (
        "summary-unreadable",
        PROBLEM,
        RUN,
        "the kept fabric summary of the output could not be read: the output file is "
        "used instead, and this run's summary replaces it",
    )
    # The node side of the job record (analysis/record/counters.py, analysis/placement/
    # task_binding.py): counters before and after a job, and each task's binding
    LINK_ERRORS_DURING_JOB = (
        "link-errors-during-job",
        PROBLEM,
        DEGRADED,
        "an HCA port's error counters rose between the job's start and end (names each "
        "counter and by how much): a link that took errors under load",
    )
    LINK_DEGRADED_DURING_JOB = (
        "link-degraded-during-job",
        PROBLEM,
        DEGRADED,
        "an HCA port's width or speed dropped, its state left ACTIVE/LinkUp, or the port was "
        "gone at the job's end: a link that degraded under load",
    )
    NVLINK_ERRORS_DURING_JOB = (
        "nvlink-errors-during-job",
        PROBLEM,
        DEGRADED,
        "a GPU's NVLink error counters (nvidia-smi nvlink -e) rose during the job",
    )
    LINK_COUNTERS_RESET = (
        "link-counters-reset",
        INFO,
        JOB_RECORD,
        "a counter was lower at the job's end than at its start (reset, HCA or driver "
        "restarted): what it counted during the job is unknown, so no rise is claimed",
    )
    BINDING_FAR_NUMA = (
        "binding-far-numa",
        PROBLEM,
        TASK,
        "none of a task's allowed CPUs is near its GPUs (their topo -m CPU Affinity): every "
        "host-device copy crosses the socket interconnect",
    )
    BINDING_SPANS_NUMA = (
        "binding-spans-numa",
        PROBLEM,
        TASK,
        "some of a task's allowed CPUs are outside its GPUs' CPU affinity: threads placed "
        "there cross the socket interconnect",
    )


_BY_TEXT: dict[str, FindingKind] = {member.value: member for member in FindingKind}


def kind(text: str) -> FindingKind | None:
    """The catalogue's kind of that text, or None (a kind this release does not know, as a
    record written by another release may hold)."""
    return _BY_TEXT.get(text)
