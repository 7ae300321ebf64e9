"""The fingerprint of a job's placement: a sha256 over the facts explain judged it by, so two
runs with one fingerprint ran on the same places over the same links in the same health."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from topograph_slurm.analysis.placement.explain import PathFacts, path_problems
from topograph_slurm.model.placement import LEVEL_LEAF, FabricMap


def fingerprint(nodes: Sequence[str], fmap: FabricMap, facts: PathFacts | None) -> str:
    """sha256 (hex) of the nodes in rank order with their units, the levels, each node's rail
    rates, each of their leaves' uplink rates and the kinds and subjects of the problems on
    their paths: the placement-relevant facts, nothing that changes run to run."""
    places = [
        [node, sorted(fmap.places[node].units) if node in fmap.places else []] for node in nodes
    ]
    facts_part: dict[str, object] = {}
    if facts is not None:
        leaves = sorted(
            {unit for _, units in places for level, unit in units if level == LEVEL_LEAF}
        )
        facts_part = {
            "rails": {node: sorted(facts.rails.get(node, [])) for node in nodes},
            "uplinks": {leaf: sorted(facts.uplinks.get(leaf, [])) for leaf in leaves},
            "problems": sorted(
                {(str(f.kind), f.subject) for f in path_problems(nodes, fmap, facts)}
            ),
            "nvlink_domains": facts.nvlink_domains,
        }
    text = json.dumps(
        {"places": places, "levels": fmap.levels, "facts": facts_part},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
