"""Half a unit with one rail fault (issue "Truth, round 3", item 3): majority inside a unit
cannot decide a tie, so the other units and the leaf names (``su1-LEAF-R0``) say which rail
each HCA belongs to.

The fabric: four 4-node units (``su0``..``su3``), two rails, one leaf per rail and unit named
``su<u>-LEAF-R<r>``, every leaf under one spine. Faults are planted in unit ``su1`` only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.fabric_builder import FabricBuilder
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.analysis.health.verdict import judge
from topograph_slurm.cli.main import main
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.result import Finding
from topograph_slurm.sources import sim

UNITS, NODES, RAILS = 4, 4, 2


def node(unit: int, slot: int) -> str:
    return f"gpu{unit * NODES + slot + 1:02d}"


def fabric(
    missing: tuple[str, ...] = (), swapped: tuple[str, ...] = (), leaf: str = "su{u}-LEAF-R{r}"
) -> Fabric:
    """*missing* nodes lack ``mlx5_1``; *swapped* nodes have ``mlx5_0`` on the rail-1 leaf and
    ``mlx5_1`` on the rail-0 leaf; leaf switches named by the *leaf* pattern."""
    fb = FabricBuilder()
    fb.switch("spine")
    for unit in range(UNITS):
        for rail in range(RAILS):
            fb.switch(leaf.format(u=unit, r=rail))
            fb.cable(leaf.format(u=unit, r=rail), "spine")
        for slot in range(NODES):
            name = node(unit, slot)
            for rail in range(RAILS):
                if rail == 1 and name in missing:
                    continue
                cabled = 1 - rail if name in swapped else rail
                fb.ca(f"{name}/{rail}", f"{name} mlx5_{rail}")
                fb.cable(f"{name}/{rail}", leaf.format(u=unit, r=cabled))
    return fb.fabric


def findings(**faults: Any) -> dict[str, set[str]]:
    """Each node with findings: the kinds."""
    found: list[Finding] = analyse(fabric(**faults), NamingPolicy()).findings
    kinds: dict[str, set[str]] = {}
    for f in found:
        kinds.setdefault(f.subject, set()).add(str(f.kind))
    return kinds


@pytest.mark.parametrize("faulty", [(node(1, 0), node(1, 1)), (node(1, 2), node(1, 3))])
def test_half_a_unit_missing_a_rail_is_missing_rail_and_the_rest_is_healthy(
    faulty: tuple[str, ...],
) -> None:
    assert findings(missing=faulty) == {n: {"missing-rail"} for n in faulty}


def test_most_of_a_unit_missing_a_rail_is_missing_rail_whatever_its_share() -> None:
    faulty = (node(1, 0), node(1, 1), node(1, 2))
    assert findings(missing=faulty) == {n: {"missing-rail"} for n in faulty}


@pytest.mark.parametrize("faulty", [(node(1, 0), node(1, 1)), (node(1, 1), node(1, 3))])
def test_half_a_unit_swapped_is_found_from_the_fabric_wide_rail_of_each_hca(
    faulty: tuple[str, ...],
) -> None:
    assert findings(swapped=faulty) == {n: {"rail-misaligned"} for n in faulty}


def test_one_node_swapped_is_still_found_by_its_units_majority() -> None:
    assert findings(swapped=(node(1, 0),)) == {node(1, 0): {"rail-misaligned"}}


def test_without_rail_numbers_in_the_leaf_names_a_tie_is_not_judged() -> None:
    """Leaves ``leaf-a-1``/``leaf-b-1``: their last number is the unit's, so no name says
    which half of su1 is right; nothing is claimed (a wrong claim would degrade good nodes)."""
    swapped = (node(1, 0), node(1, 1))
    assert findings(swapped=swapped, leaf="leaf-{r}-{u}") == {}


@pytest.mark.parametrize(("fault", "severity"), [("missing", "drain"), ("swapped", "degraded")])
def test_health_judges_the_faulty_half_and_leaves_the_rest_healthy(
    fault: str, severity: str
) -> None:
    faulty = (node(1, 0), node(1, 1))
    analysis = analyse(fabric(**{fault: faulty}), NamingPolicy())
    verdicts, _ = judge(analysis.findings, sorted(analysis.hosts.rails))
    assert {n for n, v in verdicts.items() if v.severity != "healthy"} == set(faulty)
    assert {verdicts[n].severity for n in faulty} == {severity}  # the catalogue's


def test_pools_places_decode_off_the_nodes_missing_a_rail(tmp_path: Path) -> None:
    """The simulator's fabric (four 4-node units, two rails) with gpu0005 and gpu0006 of unit
    su002 missing mlx5_1: decode goes to gpu0007 and gpu0008, the whole half."""
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=16,gpus=8,rails=2,su=4"))
    lost = re.compile(r'# "gpu000[56] mlx5_1"')
    blocks = [b for b in text.split("\n\n") if not ("\nCa\t" in b and lost.search(b))]
    kept = [line for line in "\n\n".join(blocks).splitlines() if not lost.search(line)]
    dump = tmp_path / "half.txt"
    dump.write_text("\n".join(kept) + "\n")
    args = ["pools", "--ibnetdiscover", str(dump), "--slurm-nodes", "all", "--nodes"]
    args += ["gpu[0005-0008]", "--gpus-per-node", "8", "--prefill", "2x8", "--decode", "2x8"]
    result = CliRunner().invoke(main, ["--config", os.devnull, *args])
    assert result.exit_code == 0, result.output
    decode = re.findall(r"^decode-\d: TP 8 on (\S+);", result.stdout, re.MULTILINE)
    assert sorted(decode) == ["gpu0007", "gpu0008"]
    assert "[missing-rail] gpu0005" in result.stdout and "rail-disagreement" not in result.stdout
