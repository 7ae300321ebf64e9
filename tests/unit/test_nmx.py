"""NMX (NVLink management) as the source of NVLink racks and partitions: the real
``/nmx/v1/compute-nodes`` answer (NVIDIA topograph's recorded one) with made ``/gpus`` and
``/partitions`` answers, replayed by an NMX stand-in on loopback through the real appliance
client; partitions that split racks as two block levels, aggregated as Slurm aggregates."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import real_fixture
from tests.support.nmx_standin import NmxHandler, NmxState
from tests.support.ufm_standin import Pki, Standin, make_pki, serve
from tests.unit.test_health_cli import fake_scontrol
from topograph_slurm.analysis.health.verdict import judge
from topograph_slurm.analysis.nvlink.partitions import nmx_blocks
from topograph_slurm.cli.main import main
from topograph_slurm.errors import AuthError, CollectError
from topograph_slurm.model.nvlink_partition import NvlinkInventory
from topograph_slurm.model.result import BlockTopology
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.sources import sim
from topograph_slurm.sources.nmx import collect_nmx, fetch_nmx, inventory_from_nmx
from topograph_slurm.sources.ufm import FetchOptions, UfmCredentials
from topograph_slurm.sources.ufm.credentials import NMX

NODES = "netq/netq-computeNodes-nvlink-domain.json"
MADE = Path(__file__).parent.parent / "fixtures" / "made" / "nmx"
DOMAIN = "3fbfc98b-7f95-4749-ab11-bd351a2aab3e"
USER, PASSWORD = "nmx-reader", "nmx-S3cret-77"
CREDS = UfmCredentials(USER, PASSWORD, origin="test", appliance=NMX)
V2411, V2505 = SlurmVersion.parse("24.11"), SlurmVersion.parse("25.05")


def _nodes() -> bytes:
    return real_fixture(NODES).read_bytes()


def _gpus() -> bytes:
    return (MADE / "gpus-split-domain.json").read_bytes()


def _partitions() -> bytes:
    return (MADE / "partitions-split-domain.json").read_bytes()


def _edited(data: bytes, index: int, **fields: object) -> bytes:
    entries = json.loads(data)
    entries[index].update(fields)
    return json.dumps(entries).encode()


def slurm_aggregates(topology: BlockTopology) -> list[list[str]]:
    """The level-1 aggregates slurmctld forms (block_record.c): with BlockSizes' second level
    2^k times the base, block i starts an aggregate when i mod 2^k = 0, in file order."""
    base, rack = topology.block_sizes[:2]
    step = rack // base
    blocks = topology.blocks
    return [
        sorted(n for block in blocks[i : i + step] for n in block.nodes)
        for i in range(0, len(blocks), step)
    ]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _state(nodes: bytes | None = None, fault: str | None = None) -> NmxState:
    gpus, partitions = {DOMAIN: _gpus()}, {DOMAIN: _partitions()}
    return NmxState(nodes or _nodes(), gpus, partitions, USER, PASSWORD, fault)


@pytest.fixture
def standin(pki: Pki) -> Iterator[Standin]:
    with serve(pki, _state(), handler=NmxHandler) as running:
        yield running


def _opts(pki: Pki) -> FetchOptions:
    return FetchOptions(ca_bundle=pki.ca, backoff=0.0, retries=1)


def _inventory(standin: Standin, pki: Pki) -> NvlinkInventory:
    answer = fetch_nmx(standin.url, CREDS, _opts(pki))
    return inventory_from_nmx(answer.compute_nodes, answer.gpus, answer.partitions, answer.url)


def test_the_stand_in_replays_the_real_compute_nodes_through_the_client(
    standin: Standin, pki: Pki
) -> None:
    inventory = _inventory(standin, pki)
    assert [(t.name, t.domain, t.place.slot, t.place.tray) for t in inventory.trays] == [
        ("node1", DOMAIN, 5, 4),
        ("node2", DOMAIN, 22, 12),
    ]
    assert inventory.trays[0].place.chassis == "1825024170029"
    assert {inventory.gpus[g].partition for g in inventory.trays[1].gpus} == {"2"}
    assert [(p.id, p.name, p.health) for p in inventory.partitions] == [
        ("1", "tenant-a", "HEALTHY"),
        ("2", "tenant-b", "DEGRADED_BANDWIDTH"),
    ]
    # read only: three GETs, the domain as the parameter of the two per-domain reads
    assert standin.state.requests == [
        ("GET", "/nmx/v1/compute-nodes"),
        ("GET", f"/nmx/v1/gpus?domain={DOMAIN}"),
        ("GET", f"/nmx/v1/partitions?domain={DOMAIN}"),
    ]


def test_a_split_rack_is_two_levels_aggregated_as_slurm_does(standin: Standin, pki: Pki) -> None:
    for version in (V2411, V2505):
        topology = nmx_blocks(_inventory(standin, pki), version)
        assert [(b.name, b.nodes) for b in topology.blocks] == [
            ("nvl-node1-p1", ["node1"]),
            ("nvl-node1-p2", ["node2"]),
        ]
        assert topology.block_sizes == [1, 2]
        assert slurm_aggregates(topology) == [["node1", "node2"]]
        degraded = [f for f in topology.findings if f.kind == "nvlink-partition-degraded"]
        assert [(f.subject, f.nodes) for f in degraded] == [("nvl-node1-p2", ("node2",))]


def test_without_partitions_the_rack_is_the_block() -> None:
    topology = nmx_blocks(inventory_from_nmx(_nodes()), V2505)
    assert [(b.name, b.nodes) for b in topology.blocks] == [("nvl-node1", ["node1", "node2"])]
    assert topology.block_sizes == [2]
    assert topology.findings == []


def test_a_tray_down_is_a_finding_health_drains_and_leaves_it_out(pki: Pki) -> None:
    state = _state(_edited(_nodes(), 1, Health="UNHEALTHY"))
    with serve(pki, state, handler=NmxHandler) as running:
        inventory = _inventory(running, pki)
    topology = nmx_blocks(inventory, V2505)
    assert [b.nodes for b in topology.blocks] == [["node1"], []]
    down = [f for f in topology.findings if f.kind == "nvlink-tray-down"]
    assert [f.subject for f in down] == ["node2"]
    assert "slot 22 tray 12" in down[0].message
    verdicts, _ = judge(topology.findings, ["node1", "node2"])
    assert verdicts["node2"].severity == "drain"
    assert verdicts["node1"].severity == "healthy"
    # 24.11 takes no empty block: the emptied partition is left out, one level remains
    old = nmx_blocks(inventory, V2411)
    assert ([b.nodes for b in old.blocks], old.block_sizes) == ([["node1"]], [1])
    assert (
        "one emptied"
        in next(f for f in old.findings if f.kind == "nvlink-partitions-uneven").message
    )


def test_a_gpu_out_of_its_partition_is_a_finding_health_drains() -> None:
    gpus = _edited(_gpus(), 7, PartitionID=1)  # one of node2's GPUs, now in partition 1
    partitions = json.loads(_partitions())
    moved = json.loads(_gpus())[7]["ID"]
    partitions[1]["GpuIDList"].remove(moved)
    partitions[0]["GpuIDList"].append(moved)
    inventory = inventory_from_nmx(_nodes(), [gpus], [json.dumps(partitions)])
    topology = nmx_blocks(inventory, V2505)
    outside = [f for f in topology.findings if f.kind == "nvlink-gpu-outside-partition"]
    assert [f.subject for f in outside] == ["node2"]
    assert "partition 1, partition 2" in outside[0].message
    assert all("node2" not in b.nodes for b in topology.blocks)
    verdicts, _ = judge(topology.findings, ["node1", "node2"])
    assert verdicts["node2"].severity == "drain"


def _racks(spec: str) -> NvlinkInventory:
    return inventory_from_nmx(*sim.generate_nmx(sim.parse_sim_spec(spec)))


def test_sim_nvl72_racks_split_in_two_are_racks_at_the_second_level() -> None:
    topology = nmx_blocks(_racks("nodes=54,gpus=4,nvl=72,partitions=2"), V2411)
    assert [len(b.nodes) for b in topology.blocks] == [9] * 6
    assert topology.block_sizes == [9, 18]
    racks = [[f"gpu{i:04d}" for i in range(r, r + 18)] for r in (1, 19, 37)]
    assert slurm_aggregates(topology) == racks


def test_an_uneven_split_pads_on_2505_and_is_one_level_on_2411() -> None:
    split = _racks("nodes=36,gpus=4,nvl=72,partitions=2")
    second = split.trays[18].domain
    inventory = NvlinkInventory(
        split.source,
        split.trays,
        split.gpus,
        tuple(p for p in split.partitions if p.domain != second),  # rack 2 not split
    )
    padded = nmx_blocks(inventory, V2505)
    assert [(b.name, len(b.nodes)) for b in padded.blocks] == [
        ("nvl-gpu0001-p1", 9),
        ("nvl-gpu0001-p2", 9),
        ("nvl-gpu0019", 18),
        ("nvl-gpu0019-free", 0),
    ]
    assert padded.block_sizes == [9, 18]
    assert [len(a) for a in slurm_aggregates(padded)] == [18, 18]
    flat = nmx_blocks(inventory, V2411)
    assert flat.block_sizes == [9]
    assert [b.name for b in flat.blocks] == ["nvl-gpu0001-p1", "nvl-gpu0001-p2", "nvl-gpu0019"]
    assert [f.kind for f in flat.findings] == ["nvlink-partitions-uneven"]


def test_a_tray_down_on_2411_shrinks_the_base_and_keeps_the_racks() -> None:
    topology = nmx_blocks(_racks("nodes=36,gpus=4,nvl=72,partitions=2,down=3"), V2411)
    assert [len(b.nodes) for b in topology.blocks] == [8, 9, 9, 9]
    assert topology.block_sizes == [8, 16]
    assert [len(a) for a in slurm_aggregates(topology)] == [17, 18]


def _credentials(tmp_path: Path) -> Path:
    creds = tmp_path / "nmx.cred"
    creds.write_text(f"username: {USER}\npassword: {PASSWORD}\n")
    creds.chmod(0o600)
    return creds


def test_generate_with_nmx_writes_partition_blocks(
    standin: Standin, pki: Pki, tmp_path: Path
) -> None:
    out, report = tmp_path / "topology.conf", tmp_path / "report.txt"
    args = ["--config", os.devnull, "generate", "--sim", "nodes=4,rails=2,su=2", "--nmx"]
    args += [standin.url, "--nmx-credentials", str(_credentials(tmp_path)), "--nmx-ca-bundle"]
    args += [str(pki.ca), "--slurm-nodes", "all", "--format", "block", "--slurm-version"]
    args += ["25.05", "-o", str(out), "--report", str(report)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "BlockName=nvl-node1-p1 Nodes=node1\nBlockName=nvl-node1-p2 Nodes=node2\n" in text
    assert "BlockSizes=1,2" in text
    assert "[nvlink-partition-degraded] nvl-node1-p2" in report.read_text()
    assert PASSWORD not in result.output


def test_credentials_come_from_the_environment_and_never_argv(standin: Standin, pki: Pki) -> None:
    env = {"NMX_USERNAME": USER, "NMX_PASSWORD": PASSWORD}
    assert collect_nmx(standin.url, None, _opts(pki), env=env).compute_nodes
    with pytest.raises(AuthError):
        collect_nmx(standin.url, None, _opts(pki), env={"NETQ_USERNAME": USER})


def test_failures_are_one_line_without_the_password(pki: Pki) -> None:
    wrong = UfmCredentials(USER, "not-it", origin="test", appliance=NMX)
    with (
        serve(pki, _state(), handler=NmxHandler) as running,
        pytest.raises(AuthError, match="NMX") as err,
    ):
        fetch_nmx(running.url, wrong, _opts(pki))
    assert "not-it" not in str(err.value)
    with (
        serve(pki, _state(fault="500"), handler=NmxHandler) as running,
        pytest.raises(CollectError, match="partitions"),
    ):
        fetch_nmx(running.url, CREDS, _opts(pki))
    token = UfmCredentials(token="abc", origin="test", appliance=NMX)
    with pytest.raises(AuthError, match="username and password"):
        fetch_nmx("https://127.0.0.1:1", token, _opts(pki))


def test_sim_spec_refuses_partial_trays_and_partitions_without_racks() -> None:
    with pytest.raises(sim.SimSpecError, match="whole trays"):
        sim.parse_sim_spec("nodes=8,gpus=4,nvl=70")
    with pytest.raises(sim.SimSpecError, match="need nvl"):
        sim.parse_sim_spec("nodes=8,partitions=2")


def test_health_drains_a_tray_nmx_reports_down(
    tmp_path: Path,
) -> None:
    """Eight trays in two racks of two partitions (the fake scontrol's node0001-node0008):
    NMX reports node0003 down; health proposes its drain as for any drain-worthy finding."""
    slurm = fake_scontrol(tmp_path)
    spec = "nodes=8,gpus=4,rails=2,su=4,prefix=node,nvl=16,partitions=2,down=node0003"
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    args = ["--config", os.devnull, "health", "--sim", spec, "--json"]
    result = CliRunner().invoke(main, args, env=env)
    data = json.loads(result.stdout)
    verdicts = {row["node"]: row["verdict"] for row in data["nodes"]}
    assert verdicts["node0003"] == "drain"
    assert {verdicts[f"node{i:04d}"] for i in (1, 2, 4, 5, 6, 7, 8)} == {"healthy"}
    assert any("NodeName=node0003" in c and "State=DRAIN" in c for c in data["commands"])


def test_block_names_stay_when_a_racks_first_tray_is_down() -> None:
    names = [
        b.name for b in nmx_blocks(_racks("nodes=36,gpus=4,nvl=72,partitions=2"), V2505).blocks
    ]
    down = nmx_blocks(_racks("nodes=36,gpus=4,nvl=72,partitions=2,down=1"), V2505)
    assert [b.name for b in down.blocks] == names
    assert down.blocks[0].nodes[0] == "gpu0002"


def test_the_kept_index_names_nmx_and_ages_out_as_an_appliances_does() -> None:
    from msgspec.structs import replace

    from topograph_slurm.app.fabric import kept_source, source_stamp, stale_because
    from topograph_slurm.config import Settings

    settings = Settings(sim="nodes=4,rails=2,su=2", nmx="https://nmx.example")
    source = kept_source(settings)
    assert source == "sim:nodes=4,rails=2,su=2+nmx:https://nmx.example"
    assert source != kept_source(Settings(sim="nodes=4,rails=2,su=2"))
    kept = source_stamp(settings, source)
    assert stale_because(kept, replace(kept, analysed=kept.analysed + 60)) is None
    later = stale_because(kept, replace(kept, analysed=kept.analysed + 3 * 3600))
    assert later is not None and "fetched" in later


def test_a_partition_nmx_lists_without_members_is_no_block() -> None:
    partitions = json.loads(_partitions())
    partitions.append({"PartitionID": 32766, "Name": "Default Partition", "Health": "HEALTHY"})
    for entry in partitions:
        entry.setdefault("DomainUUID", DOMAIN)
    inventory = inventory_from_nmx(_nodes(), [_gpus()], [json.dumps(partitions)])
    topology = nmx_blocks(inventory, V2505)
    assert [b.name for b in topology.blocks] == ["nvl-node1-p1", "nvl-node1-p2"]
    assert topology.block_sizes == [1, 2]
