"""The fabric summary: what ``diff`` compares and what ``generate`` keeps beside its output.

A compact record of where every node sits (leaf, block, NVLink domain), the rails it is cabled
with and the rate each trained to, when it was last seen, and the fabric-wide facts (switches,
blocks, BlockSizes, the switch-to-switch cables running below the norm). Every ``diff`` input —
a dump, a snapshot, a topology file, a kept summary — becomes one of these first, so a single
comparison serves every mix; ``known`` says which facts an input could show (a topology.conf
knows no link rates), so the comparison can say what it could not compare instead of
reporting a difference that is only an absence of data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from topograph_slurm.model.result import Block

#: The facts a summary may hold; ``FabricSummary.known`` lists those its input could show.
FACT_NODES, FACT_LEAVES, FACT_BLOCKS = "nodes", "leaves", "blocks"
FACT_RAILS, FACT_SWITCHES, FACT_DOMAINS = "rails", "switches", "domains"
ALL_FACTS: tuple[str, ...] = (
    FACT_NODES,
    FACT_LEAVES,
    FACT_BLOCKS,
    FACT_RAILS,
    FACT_SWITCHES,
    FACT_DOMAINS,
)


class RailSummary(NamedTuple):
    """One cable of a node: its HCA (``mlx5_0``, else the HCA's GUID), the leaf switch and port
    it lands on, and the rate it trained to (``4xNDR``). A named tuple, as :class:`Link`: a
    16,384-node summary holds 131k of them, and a tuple is built (and stored in the kept file,
    as a JSON array) several times cheaper than a frozen dataclass."""

    hca: str
    switch: str
    port: int
    rate: str


@dataclass(slots=True)
class NodeSummary:
    """Where one Slurm node sits. ``kept`` marks a node absent from the sweep that keeps the
    place it had when it was ``last_seen`` (an ISO 8601 UTC time; empty when unknown)."""

    leaf: str = ""
    block: str = ""
    domain: str = ""
    rails: list[RailSummary] = field(default_factory=list)
    rails_disagree: bool = False
    last_seen: str = ""
    kept: bool = False


@dataclass(slots=True)
class FabricSummary:
    """A fabric (or a topology file) as ``diff`` compares it. ``slow_links`` maps each
    switch-to-switch cable running below ``link_norm`` to its rate; node cables are in the
    nodes' rails."""

    source: str
    known: list[str] = field(default_factory=list)
    nodes: dict[str, NodeSummary] = field(default_factory=dict)
    switches: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    block_sizes: list[int] = field(default_factory=list)
    slow_links: dict[str, str] = field(default_factory=dict)
    link_norm: str = ""

    def knows(self, fact: str) -> bool:
        """Whether this summary's input could show *fact* (one of ``ALL_FACTS``)."""
        return fact in self.known
