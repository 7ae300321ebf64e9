"""A property over simulated fabrics with a moved cable (``--sim ...,disagree=N``): whatever
the rails count (a 1:1 vote included), every node is in the written tree and block
topology.conf exactly once, or its block is left out with a finding, and every name is unique.

The files are read back with the one reader (:mod:`sources.layout`), which keeps duplicates.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topograph_slurm.cli.main import main
from topograph_slurm.sources.layout import parse_topology
from topograph_slurm.sources.sim import SimSpec, parse_sim_spec


@st.composite
def disagreeing_specs(draw: st.DrawFn) -> str:
    """A small valid ``--sim`` spec whose ``disagree`` node sits in an island of two SUs+."""
    su = draw(st.integers(1, 6))
    islands = draw(st.integers(1, 2))
    nodes = draw(st.integers(islands * (su + 1), islands * su * 3 + 2))
    spec = SimSpec(nodes=nodes, su=su, islands=islands, rails=1)
    movable = [i for r in spec.island_nodes() if len(r) > su for i in r]
    disagree = draw(st.sampled_from(movable)) + 1
    rails = draw(st.sampled_from([1, 2, 2, 3, 4]))
    tiers = draw(st.sampled_from([2, 3]))
    extras = draw(st.sets(st.sampled_from(["sharp=1", "storage=1", "pod=1"]), max_size=2))
    keys = [f"nodes={nodes}", f"su={su}", f"islands={islands}", f"rails={rails}"]
    keys += [f"tiers={tiers}", f"disagree={disagree}", *sorted(extras)]
    return ",".join(keys)


def _generate(spec: str, fmt: str, version: str, where: Path) -> tuple[str, dict[str, object]]:
    out, report = where / f"topology.{fmt}.conf", where / f"report.{fmt}.json"
    args = ["--config", os.devnull, "generate", "--sim", spec, "--format", fmt]
    args += ["--slurm-nodes", "all", "--slurm-version", version, "-o", str(out)]
    args += ["--report", str(report), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out.read_text(), json.loads(report.read_text())


def _once(names: list[str], what: str) -> None:
    repeated = sorted(name for name, n in Counter(names).items() if n > 1)
    assert not repeated, f"{what} listed more than once: {repeated}"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=disagreeing_specs(), version=st.sampled_from(["24.11", "25.05"]))
def test_every_node_once_in_tree_and_blocks_and_names_unique(spec: str, version: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tree_text, tree_report = _generate(spec, "tree", version, Path(tmp))
        block_text, block_report = _generate(spec, "block", version, Path(tmp))
    tree = parse_topology(tree_text).tree
    blocks = parse_topology(block_text).blocks
    assert tree is not None and blocks is not None
    sim = parse_sim_spec(spec)
    expected = sorted(map(sim.node_name, range(sim.nodes)))
    if "storage=1" in spec:  # its servers are hosts too (--slurm-nodes all)
        expected += [f"stor-{i + 1:03d}" for i in range(max(2, -(-sim.nodes // 16)))]
    in_leaves = [node for leaf in tree.leaves for node in leaf.nodes]
    _once(in_leaves, "tree node")
    assert sorted(in_leaves) == sorted(expected)
    _once([leaf.name for leaf in tree.leaves] + [up.name for up in tree.uppers], "switch")
    _once([block.name for block in blocks.blocks], "block")
    left_out = {
        finding["subject"]
        for finding in block_report["findings"]  # type: ignore[attr-defined]
        if finding["kind"] == "undersized-block"
    }
    leaf_nodes = {leaf.name: leaf.nodes for leaf in tree.leaves}
    in_blocks = [node for block in blocks.blocks for node in block.nodes]
    in_blocks += [node for name in left_out for node in leaf_nodes[name]]
    _once(in_blocks, "block node")
    assert sorted(in_blocks) == sorted(expected)
    for exclusion in tree_report["exclusions"]:  # type: ignore[attr-defined]
        assert exclusion["reason"], exclusion
