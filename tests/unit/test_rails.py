"""Rail alignment inside a unit (``analysis/fabric/rails.py``): a node's two cables swapped
between its unit's rail leaves change no leaf and no block, yet are a ``rail-misaligned``
finding, from ibnetdiscover and UFM alike, degraded by ``health`` and drawn by ``draw``; healthy
rail-optimised fabrics, units of one leaf and HCAs named without an index give none."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.conftest import real_dump_names, real_fixture
from tests.support.ufm_standin import ufm_json_from_fabric
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import (
    HcaNames,
    NamingPolicy,
    compile_rewrites,
    hca_names,
)
from topograph_slurm.analysis.fabric.rails import misaligned_rails
from topograph_slurm.app.fabric import DEMO_SIM
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import LeafGroup
from topograph_slurm.sources import sim
from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover
from topograph_slurm.sources.ibnetdiscover.parse import read_ibnetdiscover
from topograph_slurm.sources.ufm import UfmResponses, fabric_from_ufm

Rails = dict[str, list[tuple[str, str]]]

NDR = "ibnetdiscover/dgx-superpod-ndr-quantum2-mqm9701.txt"
SELENE = "ibnetdiscover/nvidia-selene-compute-hdr-quantum.txt"
#: The one misalignment the real captures hold: in the NDR SuperPOD dump b08-p1-dgx-08-c01's
#: HCA-5 sits on the leaf where the unit's 15 other nodes have their HCA-6 and the other way
#: round (its lower GUID on the other leaf too, so the names are not merely enumerated in
#: another order): the split cable of one OSFP cage plugged into the two leaves crosswise.
REAL_SWAP = {NDR: ["b08-p1-dgx-08-c01"]}


def _unit(nodes: int, rails: int, name: str = "mlx5_{r}") -> tuple[Rails, dict[str, str]]:
    """One unit, leaf ``r{r}`` per rail; node n's HCA ``h{n}-{r}`` named *name* on ``r{r}``."""
    rails_of = {f"n{n}": [(f"h{n}-{r}", f"r{r}") for r in range(rails)] for n in range(nodes)}
    names = {f"h{n}-{r}": name.format(r=r) for n in range(nodes) for r in range(rails)}
    return rails_of, names


def _swap(rails_of: Rails, node: str, a: int, b: int) -> None:
    held = rails_of[node]
    (hca_a, leaf_a), (hca_b, leaf_b) = held[a], held[b]
    held[a], held[b] = (hca_a, leaf_b), (hca_b, leaf_a)


def _named(names: dict[str, str]) -> HcaNames:
    """The names of a test's table, as the rail check asks for them."""
    return lambda hcas: list(map(names.get, hcas))


def _judge(rails_of: Rails, names: dict[str, str]) -> list[tuple[str, str]]:
    leaves = sorted({leaf for held in rails_of.values() for _, leaf in held})
    group = LeafGroup(leaves[0], leaves, sorted(rails_of))
    found = misaligned_rails([group], rails_of, _named(names), {})
    assert all(f.kind == FindingKind.RAIL_MISALIGNED and f.is_problem for f in found)
    return [(f.subject, f.message) for f in found]


def test_two_swapped_cables_name_the_node_its_hcas_and_both_leaves() -> None:
    rails_of, names = _unit(nodes=4, rails=4)
    _swap(rails_of, "n2", 0, 1)
    assert _judge(rails_of, names) == [
        (
            "n2",
            "mlx5_0 (h2-0) is on r1, its rail's leaf is r0; mlx5_1 (h2-1) is on r0, its "
            "rail's leaf is r1 (unit r0): rail-aligned collectives through the node cross "
            "rails; cable each HCA to its rail's leaf",
        )
    ]


def test_the_hcas_are_named_in_natural_order() -> None:
    rails_of, names = _unit(nodes=3, rails=12)
    _swap(rails_of, "n0", 10, 2)
    [(_, message)] = _judge(rails_of, names)
    assert message.startswith("mlx5_2 (h0-2) is on r10, its rail's leaf is r2; mlx5_10 (h0-10)")


def test_an_aligned_unit_has_no_finding() -> None:
    assert _judge(*_unit(nodes=8, rails=8)) == []


def test_hcas_named_without_an_index_are_not_judged() -> None:
    rails_of, names = _unit(nodes=4, rails=2, name="HCA")  # every HCA of a node one name
    _swap(rails_of, "n2", 0, 1)
    assert _judge(rails_of, names) == []
    rails_of, _ = _unit(nodes=4, rails=2)
    _swap(rails_of, "n2", 0, 1)
    assert _judge(rails_of, {}) == []  # descriptions that name no HCA at all


def test_a_unit_with_several_hcas_per_leaf_is_not_rail_optimised() -> None:
    """The UFM lab's shape: each node's two HCAs on one leaf, one node on the other leaf."""
    rails_of = {f"n{n}": [(f"h{n}-{r}", "a") for r in range(2)] for n in range(4)}
    rails_of["n3"] = [("h3-0", "b"), ("h3-1", "b")]
    names = {f"h{n}-{r}": f"HCA-{r + 1}" for n in range(4) for r in range(2)}
    assert _judge(rails_of, names) == []


def test_no_majority_no_rail_and_one_leaf_no_unit() -> None:
    rails_of, names = _unit(nodes=2, rails=2)  # 1:1 on both rails: which node is wrong?
    _swap(rails_of, "n1", 0, 1)
    assert _judge(rails_of, names) == []
    one_leaf = {f"n{n}": [(f"h{n}-{r}", "leaf") for r in range(2)] for n in range(4)}
    assert (
        misaligned_rails([LeafGroup("leaf", ["leaf"], sorted(one_leaf))], one_leaf, _named({}), {})
        == []
    )


def test_a_cable_to_another_units_leaf_is_the_rail_votes_not_this() -> None:
    rails_of, names = _unit(nodes=4, rails=2)
    rails_of["n1"][1] = ("h1-1", "elsewhere")  # a rail disagreement, not a swap in the unit
    group = LeafGroup("r0", ["r0", "r1"], sorted(rails_of))
    assert misaligned_rails([group], rails_of, _named(names), {}) == []


def test_hca_names_are_the_second_word_after_the_map_and_the_rewrites() -> None:
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=2,rails=2,su=2"))
    text = text.replace('"gpu0002 mlx5_0"', '"gpu0002"').replace("gpu0002 mlx5_1", "gpu0002_port1")
    fabric = parse_ibnetdiscover(text, "sim")
    mapped = next(guid for guid, ca in fabric.cas.items() if ca.description == "gpu0001 mlx5_1")
    policy = NamingPolicy(
        node_name_map={mapped: "gpu0001 mlx5_7"},
        rewrites=compile_rewrites([(r"^(gpu\d+)_port(\d)$", r"\1 mlx5_\2")]),
    )
    hcas = [hca for held in analyse(fabric, policy).hosts.rails.values() for hca, _leaf in held]
    named = dict(zip(hcas, hca_names(fabric, policy)(hcas), strict=True))
    assert sorted(map(str, named.values())) == ["None", "mlx5_0", "mlx5_1", "mlx5_7"]
    assert named[mapped] == "mlx5_7"


@pytest.mark.parametrize("name", real_dump_names())
def test_real_captures_show_only_their_real_swap(name: str) -> None:
    analysis = analyse(read_ibnetdiscover(real_fixture(f"ibnetdiscover/{name}")), NamingPolicy())
    found = [f.subject for f in analysis.findings if f.kind == FindingKind.RAIL_MISALIGNED]
    assert found == REAL_SWAP.get(f"ibnetdiscover/{name}", [])


@pytest.mark.parametrize("spec", [DEMO_SIM, "nodes=64,su=16", "nodes=96,su=32,tiers=3,sharp=1"])
def test_healthy_simulated_fabrics_have_no_finding(spec: str) -> None:
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec(spec))
    analysis = analyse(parse_ibnetdiscover(text, spec), NamingPolicy())
    assert [f for f in analysis.findings if f.kind == FindingKind.RAIL_MISALIGNED] == []


# --------------------------------------------------------------------------------------------
# End to end: a real capture with two cables swapped in its text, through the real parser

_SWITCH_PORT = re.compile(r'^(\[\d+\]\s*)("H-[0-9a-f]+"\[\d+\]\S*\s*# "([^"]*)".*)$')
_CA_PORT = re.compile(r'^(\[\d+\]\(\w+\)\s*)("S-[0-9a-f]+"\[\d+\])(\s*# lid \d+ lmc \d+ )(".*)$')


def swap_cables(text: str, first: str, second: str) -> str:
    """*text* with the cables of the HCAs described *first* and *second* exchanged at the
    switch ends: both switch port lines and both HCA port lines, so the dump stays whole."""
    lines = text.splitlines(keepends=True)
    at: dict[str, list[int]] = {first: [], second: []}
    for i, line in enumerate(lines):
        switch_side = _SWITCH_PORT.match(line.rstrip("\r\n"))
        if switch_side and switch_side.group(3) in at:
            at[switch_side.group(3)].append(i)
        elif line.startswith("Ca") and line.rstrip().endswith(tuple(f'"{d}"' for d in at)):
            at[line.rstrip().split('"')[-2]].append(i + 1)  # its only port line follows
    (switch_a, ca_a), (switch_b, ca_b) = sorted(at[first]), sorted(at[second])

    def part(i: int, pattern: re.Pattern[str], groups: tuple[int, ...]) -> list[str]:
        match = pattern.match(lines[i].rstrip("\r\n"))
        assert match, lines[i]
        return [match.group(g) for g in groups]

    def put(i: int, pattern: re.Pattern[str], groups: tuple[int, ...], new: list[str]) -> None:
        end = lines[i][len(lines[i].rstrip("\r\n")) :]
        match = pattern.match(lines[i].rstrip("\r\n"))
        assert match
        parts = list(match.groups())
        for group, value in zip(groups, new, strict=True):
            parts[group - 1] = value
        if pattern is _SWITCH_PORT:
            parts = parts[:2]  # group 3 lies inside group 2
        lines[i] = "".join(parts) + end

    for pattern, groups, a, b in (
        (_SWITCH_PORT, (2,), switch_a, switch_b),
        (_CA_PORT, (2, 4), ca_a, ca_b),
    ):
        old_a, old_b = part(a, pattern, groups), part(b, pattern, groups)
        put(a, pattern, groups, old_b)
        put(b, pattern, groups, old_a)
    return "".join(lines)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


@pytest.fixture(scope="module")
def swapped_selene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = real_fixture(SELENE).read_text()
    path = tmp_path_factory.mktemp("selene") / "swapped.txt"
    path.write_text(swap_cables(text, "luna-0001 mlx5_0", "luna-0001 mlx5_1"))
    return path


def test_generate_reports_the_swap_and_writes_the_same_topology(
    swapped_selene: Path, tmp_path: Path
) -> None:
    healthy = run("generate", "--ibnetdiscover", str(real_fixture(SELENE)), "--format", "block")
    report = tmp_path / "report.json"
    args = ["--ibnetdiscover", str(swapped_selene), "--format", "block"]
    swapped = run("generate", *args, "--report", str(report), "--json")
    assert healthy.exit_code == swapped.exit_code == 0, swapped.output
    assert swapped.stdout == healthy.stdout  # the swap changes no leaf and no block
    [finding] = [
        f for f in json.loads(report.read_text())["findings"] if f["kind"] == "rail-misaligned"
    ]
    assert finding["subject"] == "luna-0001" and finding["level"] == "problem"
    assert re.fullmatch(
        r"mlx5_0 \(\w+\) is on (\S+), its rail's leaf is (\S+); "
        r"mlx5_1 \(\w+\) is on \2, its rail's leaf is \1 \(unit \S+\): .*",
        finding["message"],
    ), finding["message"]
    text = run("generate", *args, "--report", "-", "-o", str(tmp_path / "t.conf"))
    assert "[rail-misaligned] luna-0001: mlx5_0 (" in text.output


def test_ufm_reports_the_same_swap() -> None:
    """The UFM view of the swapped NDR SuperPOD, through the real translation: the same
    findings as ibnetdiscover's view, the planted swap beside the capture's own."""
    text = swap_cables(
        real_fixture(NDR).read_text(), "a08-p1-dgx-04-c02 mlx5_0", "a08-p1-dgx-04-c02 mlx5_1"
    )
    dumped = parse_ibnetdiscover(text, "swapped")
    answers = {key: json.dumps(value) for key, value in ufm_json_from_fabric(dumped).items()}
    via_ufm = fabric_from_ufm(UfmResponses(**answers))
    found = {}
    for source, fabric in (("ibnetdiscover", dumped), ("ufm", via_ufm)):
        analysis = analyse(fabric, NamingPolicy())
        found[source] = [
            (f.subject, f.message)
            for f in analysis.findings
            if f.kind == FindingKind.RAIL_MISALIGNED
        ]
    assert found["ufm"] == found["ibnetdiscover"]
    assert [subject for subject, _ in found["ufm"]] == ["a08-p1-dgx-04-c02", "b08-p1-dgx-08-c01"]


# --------------------------------------------------------------------------------------------
# The simulator's swap, health and draw

SWAP = "nodes=8,gpus=4,rails=2,su=4,tiers=2,prefix=node,swap=node0003"


def test_the_simulator_swaps_a_nodes_first_two_rails_and_nothing_else() -> None:
    plain = parse_ibnetdiscover(
        sim.generate_ibnetdiscover(sim.parse_sim_spec(SWAP[: SWAP.rindex(",")])), "a"
    )
    swapped = parse_ibnetdiscover(sim.generate_ibnetdiscover(sim.parse_sim_spec(SWAP)), "b")
    changed = set(plain.links) ^ set(swapped.links)
    assert {
        plain.cas[end].description
        for link in changed
        for end in (link.a_guid, link.b_guid)
        if end in plain.cas
    } == {"node0003 mlx5_0", "node0003 mlx5_1"}
    assert sim.parse_sim_spec("nodes=8,su=4,swap=3").swap_index() == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [("nodes=8,swap=node0099", "not a simulated node"), ("nodes=8,rails=1,swap=1", "two rails")],
)
def test_a_bad_swap_is_a_usage_error(text: str, message: str) -> None:
    result = run("generate", "--sim", text)
    assert result.exit_code == Exit.USAGE, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_health_proposes_the_swapped_node_degraded_not_drained(tmp_path: Path) -> None:
    nodes = [f"node{i:04d}" for i in range(1, 9)]
    entries = [
        {
            "name": n,
            "weight": 1,
            "features": [],
            "active_features": [],
            "state": ["IDLE"],
            "reason": "",
        }
        for n in nodes
    ]
    (tmp_path / "nodes.json").write_text(json.dumps({"nodes": entries}))
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        f"#!/bin/sh\ncd {tmp_path}\n"
        "if [ \"$1\" = --version ]; then echo 'slurm 24.11.5'; exit 0; fi\n"
        'if [ "$1" = show ]; then cat nodes.json; exit 0; fi\n'
        'echo "$@" >> updates.log\n'
    )
    scontrol.chmod(0o755)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    result = CliRunner().invoke(main, ["--config", os.devnull, "health", "--sim", SWAP], env=env)
    assert result.exit_code == Exit.DIFFERS, result.output
    assert "Nodes in Slurm: 8: 7 healthy, 1 degraded, 0 drain-worthy" in result.stdout
    assert "node0003         degraded  1 -> 1001     -       rail-misaligned" in result.stdout
    assert (
        "scontrol update NodeName=node0003 Weight=1001 AvailableFeatures=topo_degraded,"
        in result.stdout
    )
    assert "State=DRAIN" not in result.stdout
    assert not (tmp_path / "updates.log").exists()  # a dry run


def test_draw_colours_the_swapped_node_and_says_why() -> None:
    result = run("draw", "--sim", SWAP)
    assert result.exit_code == 0, result.output
    [node] = re.findall(
        r'<rect class="([^"]*)"[^>]*data-key="node0003"><title>([^<]*)', result.stdout
    )
    assert node[0] == "node fault-rail-misaligned"
    assert "rail-misaligned of node0003" in node[1] and "mlx5_0 (" in node[1]
    assert "rails misaligned (an HCA on another rail&#39;s leaf of its unit) (1)" in result.stdout
    assert result.stdout.count('class="node fault-rail-misaligned"') == 1
