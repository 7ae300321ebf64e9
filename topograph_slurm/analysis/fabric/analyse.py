"""From a discovered fabric to everything Slurm needs: names, leaves, tree, findings.

Pure functions only: the CLI reads inputs, this module decides, templates translate. The result
carries every exclusion and finding so that the report can show what was left out and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from itertools import chain

from topograph_slurm.analysis.fabric import degraded_links
from topograph_slurm.analysis.fabric.adjacency import Adjacency, adjacency, components
from topograph_slurm.analysis.fabric.block import blocks_from_tree, plan_blocks
from topograph_slurm.analysis.fabric.leaf import group_leaves
from topograph_slurm.analysis.fabric.naming import (
    REASON_HCA,
    REASON_SHARP,
    NamingPolicy,
    attach_hosts,
    hca_names,
    name_switches,
)
from topograph_slurm.analysis.fabric.rails import misaligned_rails
from topograph_slurm.analysis.fabric.subnet import REASON_OTHER_SUBNET, keep_main_subnet
from topograph_slurm.analysis.fabric.tree import build_tree
from topograph_slurm.analysis.fabric.unnamed import find_unnamed
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.result import Analysis, BlockTopology, Finding, HostAttachments
from topograph_slurm.model.slurm_version import SlurmVersion

#: Exclusions that are the fabric working as designed, not a node lost: SHARP aggregation
#: nodes (one inside every Quantum switch), HCAs the admin left out with ``--hcas``, and a
#: node's HCAs on another subnet (storage; the ``split-subnets`` finding counts them). The
#: text report shows each of these reasons as one line with its count; the JSON report and
#: every other reason list every adapter.
EXPECTED_REASONS = frozenset({REASON_SHARP, REASON_HCA, REASON_OTHER_SUBNET})


def _service_switches(hosts: HostAttachments, ca_leaves: Mapping[str, tuple[str, ...]]) -> set[str]:
    """Switches cabled to CAs that are not Slurm nodes (service, storage, unnamed hosts).

    SHARP aggregation nodes sit inside every Quantum switch, spines included, so they do not
    make a switch a leaf.
    """
    return {
        leaf
        for ex in hosts.exclusions
        if ex.reason != REASON_SHARP
        for leaf in ca_leaves.get(ex.guid, ())
    }


def _one_subnet_per_node(
    fabric: Fabric,
    hosts: HostAttachments,
    links: Adjacency,
    component: Mapping[str, int],
    switch_names: Mapping[str, str],
) -> tuple[HostAttachments, list[Finding]]:
    """:func:`.subnet.keep_main_subnet` when HCAs sit on more than one subnet (checked in bulk:
    nearly every fabric has one, and a 16k-node one has 131k HCAs)."""
    leaves = set(chain.from_iterable(links.ca_leaves.values()))  # a few per rail and unit
    if len(set(map(component.__getitem__, leaves))) < 2:
        return hosts, []
    return keep_main_subnet(hosts, component, fabric, switch_names)


def analyse(fabric: Fabric, policy: NamingPolicy, max_tiers: int | None = None) -> Analysis:
    """Name hosts and switches, fold rails into logical leaves, check their alignment, build the
    tree, find problems."""
    switch_names = name_switches(fabric)
    links = adjacency(fabric)
    hosts = attach_hosts(fabric, policy, switch_names, links.ca_leaves)
    component = components(links.neighbours)
    hosts, findings = _one_subnet_per_node(fabric, hosts, links, component, switch_names)
    groups, grouping = group_leaves(hosts.rails, switch_names)
    findings += grouping
    findings += misaligned_rails(groups, hosts.rails, hca_names(fabric, policy), switch_names)
    service = _service_switches(hosts, links.ca_leaves)
    tree = build_tree(links.neighbours, groups, switch_names, service, component, max_tiers)
    findings += degraded_links.islands(tree)
    findings += degraded_links.missing_rails(groups, hosts.rails)
    reach = partial(degraded_links.nodes_behind, tree, hosts.rails)
    findings += degraded_links.degraded_links(fabric, switch_names, reach)
    missing = sorted(policy.slurm_nodes - hosts.rails.keys()) if policy.slurm_nodes else []
    unnamed = find_unnamed(fabric, hosts, missing, switch_names)
    return Analysis(fabric, switch_names, hosts, tree, findings, missing, unnamed)


def ib_blocks(
    analysis: Analysis,
    version: SlurmVersion,
    block_sizes: list[int] | None = None,
    unit: int = 0,
) -> BlockTopology:
    """Blocks from an InfiniBand-only fabric: one per logical leaf, in adjacency order; the
    base at least the designed *unit* size when earlier runs knew it (``plan_blocks``)."""
    return plan_blocks(blocks_from_tree(analysis.tree), version, block_sizes, unit=unit)
