"""GPU↔NIC affinity from ``nvidia-smi topo -m``: GPUs whose nearest NIC is on the wrong NUMA
node or across the CPU interconnect, and nodes whose rails are not one NIC per GPU where their
type has that. Jobs still run on such a node, but GPUDirect RDMA crosses sockets (or a NIC is
shared), so ``health`` marks it degraded, never drained.

What the matrix can tell, and nothing more:

* A GPU's **nearest NIC(s)** are those of its best path class, ``PIX`` < ``PXB`` < ``PHB`` <
  ``NODE`` < ``SYS`` (:meth:`GpuTopology.closest_nics`).
* A **NIC's NUMA node** is not printed; a path nearer than ``SYS`` stays inside one NUMA node,
  so the NIC shares the NUMA node of each GPU it is not ``SYS`` from
  (:meth:`GpuTopology.near_numas`). A NIC ``SYS`` from every GPU sits nowhere we can tell.
* ``gpu-nic-far-numa``: the GPU reaches its nearest NIC nearer than ``SYS``, yet every *other*
  GPU that reaches that NIC nearer than ``SYS`` is on another NUMA node by its NUMA Affinity
  column. The matrix then contradicts the GPU's own affinity: Slurm binds the GPU's tasks to
  its NUMA node's cores (gres.conf ``Cores=``) while its NIC hangs off the other socket.
* ``gpu-nic-sys-only``: the GPU has no NIC nearer than ``SYS`` while another GPU of the same
  node has one. A node where *every* GPU is ``SYS`` from every NIC is its design, not a fault
  (a GB200 tray: the NICs hang off Grace, reached over NVLink-C2C), so it gives no finding.
* ``gpu-nic-rails-uneven``: one NIC per GPU means each GPU has exactly one nearest NIC, nearer
  than ``SYS``, shared with no other GPU. Nodes of a type (the same GPU count) mostly built
  that way make each of their nodes that is not a finding (a NIC gone from the bus leaves its
  GPU on a neighbour's rail); a type mostly built otherwise (a DGX A100's two GPUs per NIC
  pair) gives none, and neither does a tie.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import GpuTopology
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Finding

#: The kinds this module makes (draw gives them one fault class).
AFFINITY_KINDS = (
    FindingKind.GPU_NIC_FAR_NUMA,
    FindingKind.GPU_NIC_SYS_ONLY,
    FindingKind.GPU_NIC_RAILS_UNEVEN,
)


@dataclass(frozen=True, slots=True)
class AffinityIssue:
    """One affinity finding of one node (its subject), with the GPUs and NICs it is about
    (what draw marks on the node view)."""

    finding: Finding
    gpus: tuple[int, ...]
    nics: tuple[str, ...] = ()


def _gpus(gpus: list[int]) -> str:
    return ", ".join(f"GPU{gpu}" for gpu in gpus)


def far_numa(node: str, topo: GpuTopology) -> list[AffinityIssue]:
    """GPUs whose nearest NIC sits with the GPUs of another NUMA node (see the module)."""
    issues = []
    for gpu in topo.gpus:
        numa, link = topo.numa_node(gpu), topo.closest_link(gpu)
        if numa is None or link in (None, "SYS"):
            continue
        for nic in topo.closest_nics(gpu):
            witnesses = sorted(n for n in topo.near_numas(nic, besides=gpu) if n is not None)
            if witnesses and numa not in witnesses:
                where = ", ".join(map(str, witnesses))
                message = (
                    f"GPU{gpu} (NUMA {numa}) reaches its nearest NIC {nic} over {link}, but "
                    f"{nic} sits with the GPUs of NUMA {where}: its traffic crosses sockets"
                )
                issues.append(
                    AffinityIssue(
                        Finding(FindingKind.GPU_NIC_FAR_NUMA, node, message), (gpu,), (nic,)
                    )
                )
                break
    return issues


def sys_only(node: str, topo: GpuTopology) -> list[AffinityIssue]:
    """The GPUs with no NIC nearer than ``SYS`` on a node where other GPUs have one."""
    far = [gpu for gpu in topo.gpus if topo.closest_link(gpu) == "SYS"]
    near = [gpu for gpu in topo.gpus if topo.closest_link(gpu) not in (None, "SYS")]
    if not far or not near:
        return []
    message = (
        f"{_gpus(far)}: no NIC nearer than SYS (every path crosses the CPU interconnect), "
        f"while {_gpus(near)} reach one inside their NUMA node"
    )
    return [AffinityIssue(Finding(FindingKind.GPU_NIC_SYS_ONLY, node, message), tuple(far))]


def off_rail(topo: GpuTopology) -> list[int]:
    """The GPUs that do not have one NIC of their own: none or several nearest, only over
    ``SYS``, or a nearest NIC shared with another GPU. Empty: one NIC per GPU."""
    rails = topo.rails
    owners: dict[str, int] = defaultdict(int)
    for nics in rails.values():
        for nic in nics:
            owners[nic] += 1
    return [
        gpu
        for gpu, nics in rails.items()
        if len(nics) != 1 or topo.closest_link(gpu) == "SYS" or owners[nics[0]] > 1
    ]


def uneven_rails(topologies: Mapping[str, GpuTopology]) -> list[AffinityIssue]:
    """Nodes without one NIC per GPU where most nodes of their GPU count have one."""
    by_count: dict[int, list[str]] = defaultdict(list)
    for name, topo in topologies.items():
        by_count[topo.gpu_count].append(name)
    issues = []
    for count, members in by_count.items():
        odd = {name: off_rail(topologies[name]) for name in members}
        uneven = [name for name in members if odd[name]]
        if len(uneven) * 2 >= len(members):  # the type is not mostly one NIC per GPU
            continue
        for name in uneven:
            message = (
                f"{_gpus(odd[name])} have no NIC of their own, while most {count}-GPU nodes "
                f"({len(members) - len(uneven)} of {len(members)}) have one NIC per GPU"
            )
            finding = Finding(FindingKind.GPU_NIC_RAILS_UNEVEN, name, message)
            rails = topologies[name].rails
            nics = tuple(dict.fromkeys(nic for gpu in odd[name] for nic in rails[gpu]))
            issues.append(AffinityIssue(finding, tuple(odd[name]), nics))
    return issues


def affinity_issues(topologies: Mapping[str, GpuTopology]) -> list[AffinityIssue]:
    """Every affinity issue of every node, in node order."""
    issues = [*uneven_rails(topologies)]
    for name, topo in topologies.items():
        issues += far_numa(name, topo) + sys_only(name, topo)
    return sorted(issues, key=lambda i: (natural_key(i.finding.subject), i.finding.kind))


def affinity_findings(topologies: Mapping[str, GpuTopology]) -> list[Finding]:
    """:func:`affinity_issues` as findings (subject: the node)."""
    return [issue.finding for issue in affinity_issues(topologies)]
