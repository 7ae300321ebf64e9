"""A node's rails live on one subnet: HCAs it has on another one are left out, with a reason.

One dump can hold several subnets: ``ibnetdiscover`` run from a compute HCA and from a storage
HCA written to one file, or a UFM that manages both fabrics. A DGX then shows eight HCAs on the
compute fabric and two on the storage fabric, with no cable between the two. Slurm's topology is
about the fabric jobs talk over, which is the one holding most of the node's HCAs; the HCAs on
other subnets become exclusions (so the storage leaves never pose as compute leaves) and one
finding says how many. ``--hcas`` chooses by HCA name instead, for storage HCAs that share the
compute subnet (a converged fabric), which no cabling argument can tell apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ClusterShell.NodeSet import NodeSet

from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import Exclusion, Finding, HostAttachments

REASON_OTHER_SUBNET = "on another subnet than most of its node's HCAs (storage fabric?)"


def keep_main_subnet(
    hosts: HostAttachments,
    component: Mapping[str, int],
    fabric: Fabric,
    switch_names: Mapping[str, str],
) -> tuple[HostAttachments, list[Finding]]:
    """Each node keeps the HCAs on the subnet holding most of them; the rest become
    exclusions, summed up in one finding. A node whose HCAs are spread evenly (a multi-plane
    fabric: rails 0-3 on one plane, 4-7 on another, no cable between) keeps them all, as the
    planes are one fabric to Slurm."""
    kept = HostAttachments(exclusions=list(hosts.exclusions))
    split: list[str] = []
    for node, rails in hosts.rails.items():
        ranked = Counter(component[leaf] for _, leaf in rails).most_common()
        if len(ranked) == 1 or ranked[0][1] == ranked[1][1]:
            kept.rails[node] = rails  # one subnet, or planes of equal weight: all are rails
            continue
        main = ranked[0][0]
        kept.rails[node] = [rail for rail in rails if component[rail[1]] == main]
        split.append(node)
        kept.exclusions += [
            Exclusion(
                guid,
                fabric.cas[guid].description,
                switch_names.get(leaf, leaf),
                REASON_OTHER_SUBNET,
            )
            for guid, leaf in rails
            if component[leaf] != main
        ]
    if not split:
        return hosts, []
    kept.exclusions.sort(key=lambda ex: ex.guid)
    left_out = len(kept.exclusions) - len(hosts.exclusions)
    finding = Finding(
        FindingKind.SPLIT_SUBNETS,
        str(NodeSet.fromlist(split)),
        f"{len(split)} node(s) have HCAs on subnets no cable joins; kept the subnet with most "
        f"of each node's HCAs and left out {left_out} HCA(s) (see exclusions); "
        "--hcas chooses by HCA name instead",
    )
    return kept, [finding]
