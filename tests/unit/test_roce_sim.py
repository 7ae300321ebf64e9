"""``--sim …,fabric=roce``: the cabling of an InfiniBand simulation as an Ethernet/RoCE fabric
in NetQ's topology-graph form, read by the NetQ translation. The same spec with ``fabric=ib``
is its ibnetdiscover twin; both must give the same topology, and every command that reads a
fabric must work on the RoCE one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.unit.test_health_cli import fake_scontrol, slurm_node
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources import sim
from topograph_slurm.sources.netq import fabric_from_netq
from topograph_slurm.sources.sim import SimSpecError

ROCE = "nodes=32,gpus=8,rails=4,su=8,tiers=2,fabric=roce"


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args], env=env)


def _topology(spec: str, tmp_path: Path, *extra: str) -> str:
    out = tmp_path / f"{len(list(tmp_path.iterdir()))}.conf"
    result = run("generate", "--sim", spec, "--slurm-nodes", "all", "-o", str(out), *extra)
    assert result.exit_code == 0, result.output
    return out.read_text()


@pytest.mark.parametrize(
    "shape",
    [
        "nodes=32,rails=4,su=8,tiers=2",
        "nodes=128,rails=4,su=16,tiers=3,pod=2",  # super-spines
        "nodes=32,rails=4,su=8,disagree=5",
        "nodes=32,rails=4,su=8,swap=3",
    ],
)
@pytest.mark.parametrize("fmt", ["tree", "block"])
def test_a_roce_fabric_and_its_ibnetdiscover_twin_give_the_same_file(
    shape: str, fmt: str, tmp_path: Path
) -> None:
    roce = _topology(f"{shape},fabric=roce", tmp_path, "--format", fmt)
    assert roce == _topology(f"{shape},fabric=ib", tmp_path, "--format", fmt)
    assert "Nodes=gpu" in roce


def test_the_roce_graph_is_netqs_shape_with_cumulus_ports_and_compounded_links() -> None:
    text = sim.generate_netq(sim.parse_sim_spec(ROCE))
    (graph,) = json.loads(text)
    tiers = {group["tier"]: group["compounded_nodes"] for group in graph["nodes"]}
    assert sorted(tiers) == [-1, 1, 2]
    assert len(tiers[-1]) == 32 and len(tiers[1]) == 4 * 4
    assert {d["device_type"] for d in tiers[-1]} == {"discovered_via_lldp"}
    cables = [c for link in graph["links"] for c in link["compounded_links"]]
    assert {end["interface"] for c in cables for end in c["interfaces"]} >= {"swp1", "eth0"}
    assert any(link["size"] > 1 for link in graph["links"])  # leaf-spine cables compounded
    fabric = fabric_from_netq([text])
    assert len(fabric.cas) == 32 * 4 and len(fabric.links) == len(cables)


@pytest.mark.parametrize("extra", ["sharp=1", "storage=1", "degraded=1", "islands=2", "fabric=x"])
def test_what_a_netq_graph_cannot_show_is_refused(extra: str) -> None:
    with pytest.raises(SimSpecError, match="fabric"):
        sim.parse_sim_spec(f"{ROCE.replace(',fabric=roce', '')},{extra},fabric=roce")


def test_health_judges_a_roce_fabric(tmp_path: Path) -> None:
    slurm = fake_scontrol(tmp_path)
    nodes = [f"gpu{i:04d}" for i in range(1, 33)]
    (slurm / "nodes.json").write_text(json.dumps({"nodes": [slurm_node(n) for n in nodes]}))
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    result = run("health", "--sim", ROCE + ",swap=gpu0003", env=env)
    assert result.exit_code == Exit.DIFFERS, result.output
    assert "gpu0003" in result.stdout and "rail-misaligned" in result.stdout


def test_explain_and_order_place_a_job_on_a_roce_fabric() -> None:
    nodes = ["--nodes", "gpu[0001-0002],gpu[0009-0010]", "--tp", "8"]
    explained = run("explain", "--sim", ROCE, *nodes)
    assert explained.exit_code == 0, explained.output
    assert "leaf" in explained.stdout
    assert "slowest link fabric link (rate unknown)" in explained.stdout  # not "InfiniBand ???"
    ordered = run("order", "--sim", ROCE, *nodes)
    assert ordered.exit_code == 0, ordered.output
    assert sorted(ordered.stdout.split()) == ["gpu0001", "gpu0002", "gpu0009", "gpu0010"]


def test_pools_place_instances_on_a_roce_fabric() -> None:
    args = ["--nodes", "gpu[0001-0004]", "--prefill", "2x8", "--decode", "2x8"]
    result = run("pools", "--sim", ROCE, *args)
    assert result.exit_code == 0, result.output
    assert "prefill" in result.stdout and "decode" in result.stdout


def test_draw_pictures_a_roce_fabric(tmp_path: Path) -> None:
    out = tmp_path / "fabric.svg"
    result = run("draw", "--sim", ROCE, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "leaf-su001-r0" in out.read_text()


def _analysed(graph: dict[str, object]) -> list[str]:
    fabric = fabric_from_netq([json.dumps([graph])])
    return sorted({f"{f.kind}:{f.subject}" for f in analyse(fabric, NamingPolicy()).findings})


def test_a_missing_rail_and_islands_are_found_on_netqs_graph() -> None:
    (graph,) = json.loads(sim.generate_netq(sim.parse_sim_spec(ROCE)))
    links = graph["links"]
    host = next(
        d["id"] for t in graph["nodes"] for d in t["compounded_nodes"] if d["name"] == "gpu0005"
    )
    gone = next(link for link in links if host in (link["src"], link["target"]))
    assert _analysed({**graph, "links": [x for x in links if x is not gone]}) == [
        "missing-rail:gpu0005"
    ]
    tiers = {d["id"]: d["tier"] for t in graph["nodes"] for d in t["compounded_nodes"]}
    no_spine = [x for x in links if 2 not in (tiers[x["src"]], tiers[x["target"]])]
    assert [f for f in _analysed({**graph, "links": no_spine}) if f.startswith("islands")]
