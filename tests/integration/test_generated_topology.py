"""Every generated topology is judged by the real slurmctld (24.11 and 26.05).

For each real ibnetdiscover dump in tests/fixtures/real and several simulated fabrics we generate
tree and block topology with ``topograph-slurm generate``, start slurmctld with exactly the fabric's
nodes, and require: it starts, its log has no topology error or warning, and ``scontrol show
topology`` parsed back equals our model (every node under exactly one leaf or block; parents;
blocks, their order and BlockSizes). On 26.05 tree and block go in as one topology.yaml.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness import Topology, ValidationResult

from tests.conftest import real_dump_names, real_fixture
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

pytestmark = pytest.mark.integration

Validate = Callable[..., ValidationResult]

SIMS = {
    "sim-2tier": "nodes=32,rails=4,su=8,tiers=2,sharp=1",
    "sim-3tier": "nodes=64,rails=2,su=8,tiers=3,pod=2",
    "sim-islands": "nodes=16,rails=2,su=4,islands=2",
    "sim-disagree": "nodes=24,rails=4,su=8,disagree=3,degraded=2",
    "sim-tie": "nodes=16,rails=2,su=8,disagree=3",  # a 1:1 rail vote: once two leaves alike
    # Ethernet/RoCE from NetQ's graph: leaves, spines, super-spines, a rail swapped
    "sim-roce": "nodes=64,rails=4,su=8,tiers=3,pod=2,swap=5,fabric=roce",
}


def _generate(source: list[str], fmt: str, version: str, tmp: Path) -> tuple[str, dict]:
    """Run the real CLI; returns (topology text, JSON report)."""
    report = tmp / f"report-{fmt}.json"
    result = CliRunner().invoke(
        main,
        [
            "--config",
            os.devnull,
            "generate",
            *source,
            "--format",
            fmt,
            "--slurm-version",
            version,
            "--report",
            str(report),
            "--json",
        ],
    )
    data = json.loads(report.read_text())
    if data["nodes"] == 0:  # every HCA excluded (reported): nothing to give slurmctld
        assert result.exit_code == Exit.INPUT and data["exclusions"]
        return "", data
    assert result.exit_code == 0, result.output
    return result.stdout, data


def _assert_tree(topo: Topology, report: dict) -> None:
    leaves = {s.name: sorted(s.nodes) for s in topo.switches if s.level == 0}
    assert leaves == {leaf["name"]: sorted(leaf["nodes"]) for leaf in report["leaves"]}
    placed = [node for nodes in leaves.values() for node in nodes]
    assert len(placed) == len(set(placed)) == report["nodes"]
    parents = {s.name: sorted(s.switches) for s in topo.switches if s.level > 0}
    assert parents == {up["name"]: sorted(up["children"]) for up in report["uppers"]}


def _assert_blocks(topo: Topology, report: dict) -> None:
    base = [(b.name, sorted(b.nodes)) for b in topo.base_blocks]
    assert base == [(b["name"], sorted(b["nodes"])) for b in report["blocks"]]
    placed = [node for _, nodes in base for node in nodes]
    assert len(placed) == len(set(placed))
    assert {b.size for b in topo.base_blocks if len(b.nodes) >= report["block_sizes"][0]} == {
        report["block_sizes"][0]
    }


ISLAND_WARNING = "no switch can reach all nodes"
LACK = re.compile(r"blocks lack access to (\d+) nodes")


def _expected(line: str, report: dict) -> bool:
    """Warnings our report predicts: islands, and (24.11) nodes of undersized blocks that
    were left out — exactly as many as the report's blocks miss."""
    kinds = {f["kind"] for f in report["findings"]}
    if ISLAND_WARNING in line:
        return "islands" in kinds
    lack = LACK.search(line)
    if lack and "undersized-block" in kinds:
        return int(lack.group(1)) == report["nodes"] - report["block_nodes"]
    return False


def _problems(result: ValidationResult, report: dict) -> list[str]:
    """slurmctld's problem lines, less the warnings the report explains."""
    return [line for line in result.problems if not _expected(line, report)]


def _check(validate: Validate, version: str, source: list[str], tmp: Path) -> None:
    tree, tree_report = _generate(source, "tree", version, tmp)
    if not tree_report["nodes"]:
        return
    block, block_report = _generate(source, "block", version, tmp)
    nodes = sorted({node for leaf in tree_report["leaves"] for node in leaf["nodes"]})
    if version.startswith("24."):
        for text, check, report in (
            (tree, _assert_tree, tree_report),
            (block, _assert_blocks, block_report),
        ):
            result = validate(nodes, topology_conf=text)
            assert result.started and _problems(result, report) == [], result.log_text[-3000:]
            check(result.topology, report)
        return
    yaml_text, _ = _generate(source, "yaml", version, tmp)
    result = validate(nodes, topology_yaml=yaml_text)
    assert result.started and _problems(result, tree_report) == [], result.log_text[-3000:]
    _assert_tree(result.named("ib"), tree_report)
    _assert_blocks(result.named("su"), block_report)


@pytest.mark.parametrize("name", sorted(SIMS))
def test_sim_fabric_accepted(
    validate: Validate, slurm_version: str, name: str, tmp_path: Path
) -> None:
    _check(validate, slurm_version, ["--sim", SIMS[name]], tmp_path)


@pytest.mark.parametrize("name", real_dump_names())
def test_real_dump_accepted(
    validate: Validate, slurm_version: str, name: str, tmp_path: Path
) -> None:
    dump = real_fixture(f"ibnetdiscover/{name}")
    _check(validate, slurm_version, ["--ibnetdiscover", str(dump)], tmp_path)
