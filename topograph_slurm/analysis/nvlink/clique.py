"""NVLink domains (cliques) from per-GPU fabric registrations.

On GB200/GB300 NVL72 racks every GPU registers with the NVLink fabric manager and reports a
``ClusterUUID`` and a ``CliqueId``; GPUs that share both can talk over NVLink. The domain id
is ``<ClusterUUID>.<CliqueId>``, and the nodes of one domain become one Slurm block.

The rules here are deliberately forgiving: a node whose GPUs are not registered, not
finished, unhealthy or inconsistent is a :class:`Finding` with a reason a sysadmin can act on,
never an exception — one broken tray must not stop the topology of the other 71 from being
written. An all-zero ClusterUUID is what a single-node NVSwitch system (HGX H100/H200)
reports: its GPUs are NVLinked inside the node only, so it is not a multi-node domain.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

from ClusterShell.RangeSet import RangeSet

from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import ZERO_UUID, DomainKind, DomainResult, GpuFabric
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.result import Finding

STATE_COMPLETED = "Completed"
STATUS_SUCCESS = "Success"
HEALTHY_SUMMARY = frozenset({"Healthy"})
HEALTHY_BANDWIDTH = frozenset({"Full"})


#: The kinds of a node's NVLink verdict (every kind this module's findings carry).
VERDICT_KINDS: tuple[FindingKind, ...] = (
    FindingKind.NO_GPUS,
    FindingKind.FABRIC_NA,
    FindingKind.FABRIC_PARTIAL,
    FindingKind.FABRIC_NOT_COMPLETED,
    FindingKind.FABRIC_STATUS,
    FindingKind.FABRIC_UNHEALTHY,
    FindingKind.FABRIC_MISSING_ID,
    FindingKind.FABRIC_DISAGREE,
    FindingKind.GPU_COUNT_MISMATCH,
    FindingKind.SINGLE_NODE_NVSWITCH,
    FindingKind.FABRIC_STATE_NOT_COLLECTED,
)

#: The one message of every node read from ClusterUUID/CliqueId alone (identical on every
#: node, so the text report folds them into one line).
NOT_COLLECTED_MESSAGE = (
    "fabric State, Status and Health were not collected (two-column "
    "--query-gpu=fabric.clusterUuid,fabric.cliqueId output, as NVIDIA topograph stores it): "
    "the NVLink domain is taken from ClusterUUID and CliqueId alone"
)


def _gpus(indices: Iterable[int]) -> str:
    """``GPU 0-3,6`` — compact so a 72-GPU message stays one line."""
    return "GPU " + str(RangeSet.fromlist([str(i) for i in sorted(set(indices))] or ["0"]))


def _by_value(gpus: Iterable[GpuFabric], attr: str) -> dict[str | None, list[int]]:
    """GPU indices grouped by one attribute's value, in value order (None first)."""
    groups: dict[str | None, list[int]] = defaultdict(list)
    for gpu in gpus:
        groups[getattr(gpu, attr)].append(gpu.index)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")))


def _state_findings(node: str, gpus: list[GpuFabric]) -> list[Finding]:
    """GPUs with fabric info whose registration is missing in part or not finished."""
    out: list[Finding] = []
    missing = [g.index for g in gpus if g.state is None]
    if missing:
        out.append(
            Finding(
                FindingKind.FABRIC_PARTIAL,
                node,
                f"{_gpus(missing)} report fabric State N/A while other GPUs are registered",
            )
        )
    present = [g for g in gpus if g.state is not None and g.state != STATE_COMPLETED]
    for state, idx in _by_value(present, "state").items():
        out.append(
            Finding(
                FindingKind.FABRIC_NOT_COMPLETED,
                node,
                f"{_gpus(idx)} fabric State is {state!r}, not 'Completed' "
                "(fabric manager registration not finished or failed)",
            )
        )
    return out


def _healthy(gpu: GpuFabric) -> bool:
    """Health as far as the driver reports it; absent (older drivers) counts as healthy.

    Any yes/no Health entry reading True (Route Unhealthy, Route Recovery in progress)
    means NVLink traffic may not flow right now, which is what a block promises.
    """
    if gpu.health is not None and gpu.health not in HEALTHY_SUMMARY:
        return False
    if gpu.health_bandwidth is not None and gpu.health_bandwidth not in HEALTHY_BANDWIDTH:
        return False
    return not gpu.health_flags


def _completed_findings(node: str, done: list[GpuFabric]) -> list[Finding]:
    """Registered GPUs whose status, health or identifiers make them unusable."""
    out: list[Finding] = []
    bad_status = [g for g in done if g.status != STATUS_SUCCESS]
    for status, idx in _by_value(bad_status, "status").items():
        shown = "N/A" if status is None else repr(status)
        out.append(
            Finding(
                FindingKind.FABRIC_STATUS,
                node,
                f"{_gpus(idx)} fabric Status is {shown}, not Success",
            )
        )
    for g in done:
        if _healthy(g):
            continue
        flags = f", {', '.join(g.health_flags)}: True" if g.health_flags else ""
        out.append(
            Finding(
                FindingKind.FABRIC_UNHEALTHY,
                node,
                f"{_gpus([g.index])} fabric Health Summary {g.health or 'N/A'!r}, "
                f"Bandwidth {g.health_bandwidth or 'N/A'!r}{flags}",
            )
        )
    no_id = [g.index for g in done if g.domain_id is None]
    if no_id:
        out.append(
            Finding(
                FindingKind.FABRIC_MISSING_ID,
                node,
                f"{_gpus(no_id)} fabric is Completed but CliqueId or ClusterUUID is N/A",
            )
        )
    return out


def _disagreement(node: str, done: list[GpuFabric]) -> Finding | None:
    """A node is one tray: all its GPUs must be in one domain, or it belongs to none."""
    groups = _by_value([g for g in done if g.domain_id], "domain_id")
    if len(groups) < 2:
        return None
    detail = "; ".join(f"{_gpus(idx)} in {dom}" for dom, idx in groups.items())
    return Finding(
        FindingKind.FABRIC_DISAGREE, node, f"GPUs disagree on the NVLink domain: {detail}"
    )


def _no_fabric(node: str, gpus: list[GpuFabric], what: str) -> DomainResult:
    """No GPU reports fabric information (*what* says which): not in a multi-node domain."""
    finding = Finding(
        FindingKind.FABRIC_NA,
        node,
        f"{what} on {_gpus(g.index for g in gpus)}: not part of a multi-node NVLink domain",
    )
    return DomainResult(DomainKind.NONE, len(gpus), findings=(finding,))


def _ids_only(node: str, gpus: list[GpuFabric]) -> DomainResult:
    """The verdict from ClusterUUID/CliqueId alone, when State, Status and Health were not
    collected: GPUs without ids are not in a domain, GPUs must agree, and nothing is said
    about registration or health that nobody asked nvidia-smi about."""
    if all(g.domain_id is None for g in gpus):
        return _no_fabric(node, gpus, "ClusterUUID/CliqueId N/A (State not collected)")
    findings = []
    no_id = [g.index for g in gpus if g.domain_id is None]
    if no_id:
        message = f"{_gpus(no_id)} report ClusterUUID or CliqueId N/A while other GPUs do not"
        findings.append(Finding(FindingKind.FABRIC_MISSING_ID, node, message))
    disagree = _disagreement(node, gpus)
    if disagree is not None:
        findings.append(disagree)
    note = Finding(FindingKind.FABRIC_STATE_NOT_COLLECTED, node, NOT_COLLECTED_MESSAGE)
    return _verdict(gpus, findings, note)


def _verdict(
    gpus: list[GpuFabric], problems: list[Finding], note: Finding | None = None
) -> DomainResult:
    """INVALID with the problems, else single-node (all-zero ClusterUUID) or multi-node;
    an informational *note* is kept either way."""
    ids = {(g.cluster_uuid, g.clique_id) for g in gpus if g.domain_id}
    uuid, clique = next(iter(ids)) if len(ids) == 1 else (None, None)
    findings = (*problems, note) if note is not None else tuple(problems)
    if problems:
        return DomainResult(DomainKind.INVALID, len(gpus), None, uuid, clique, findings)
    if uuid == ZERO_UUID:
        return DomainResult(DomainKind.SINGLE_NODE, len(gpus), None, uuid, clique, findings)
    domain = f"{uuid}.{clique}"
    return DomainResult(DomainKind.MULTI_NODE, len(gpus), domain, uuid, clique, findings)


def node_domain(gpus: list[GpuFabric], node: str = "") -> DomainResult:
    """Decide which NVLink domain one node's GPUs put it in, with findings for every doubt."""
    if not gpus:
        finding = Finding(FindingKind.NO_GPUS, node, "no GPUs reported")
        return DomainResult(DomainKind.NONE, 0, findings=(finding,))
    if not any(g.state_collected for g in gpus):
        return _ids_only(node, gpus)
    if all(g.state is None for g in gpus):
        return _no_fabric(node, gpus, "no NVLink fabric information (State N/A)")
    done = [g for g in gpus if g.state == STATE_COMPLETED]
    findings = _state_findings(node, gpus) + _completed_findings(node, done)
    disagree = _disagreement(node, done)
    if disagree is not None:
        findings.append(disagree)
    return _verdict(gpus, findings)


def domain_results(gpus_by_node: Mapping[str, list[GpuFabric]]) -> dict[str, DomainResult]:
    """The NVLink verdict (:func:`node_domain`) of every node, by node."""
    return {node: node_domain(gpus, node) for node, gpus in gpus_by_node.items()}


def _count_findings(
    domains: Mapping[str, list[str]], gpu_counts: Mapping[str, int]
) -> list[Finding]:
    """A tray showing fewer GPUs than its rack-mates has usually lost one off the bus."""
    out: list[Finding] = []
    for domain, nodes in domains.items():
        usual, _ = Counter(gpu_counts[n] for n in nodes).most_common(1)[0]
        for n in nodes:
            if gpu_counts[n] != usual:
                out.append(
                    Finding(
                        FindingKind.GPU_COUNT_MISMATCH,
                        n,
                        f"{gpu_counts[n]} GPUs in domain {domain}, "
                        f"where nodes usually have {usual}",
                    )
                )
    return out


def group_domains(
    per_node: Mapping[str, DomainResult],
) -> tuple[dict[str, list[str]], list[Finding]]:
    """Nodes per multi-node NVLink domain, plus every finding, both in stable order.

    Only clean multi-node nodes join a domain; the rest are reported: faults with their
    reason and single-node NVSwitch systems as informational findings, so no node vanishes
    from the report silently. A node judged on ClusterUUID/CliqueId alone also gets an
    informational finding saying its state and health were not collected. Domains are keyed
    and ordered by domain id, nodes naturally.
    """
    domains: dict[str, list[str]] = defaultdict(list)
    findings: list[Finding] = []
    gpu_counts: dict[str, int] = {}
    for node in sorted(per_node, key=natural_key):
        result = per_node[node]
        findings.extend(replace(f, subject=node) for f in result.findings)
        if result.kind is DomainKind.MULTI_NODE and result.domain_id and result.ok:
            domains[result.domain_id].append(node)
            gpu_counts[node] = result.gpu_count
        elif result.kind is DomainKind.SINGLE_NODE and result.ok:
            findings.append(
                Finding(
                    FindingKind.SINGLE_NODE_NVSWITCH,
                    node,
                    f"all-zero ClusterUUID on {result.gpu_count} GPUs: single-node NVSwitch "
                    "system, not a multi-node NVLink domain",
                )
            )
    ordered = {d: domains[d] for d in sorted(domains)}
    findings.extend(_count_findings(ordered, gpu_counts))
    findings.sort(key=lambda f: natural_key(f.subject))
    return ordered, findings
