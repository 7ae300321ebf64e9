"""Simulated fabrics: spec parsing, shapes (counted from first principles), determinism, scale."""

from __future__ import annotations

import io
import time
from collections import Counter
from dataclasses import replace

import pytest

from topograph_slurm.errors import UsageError
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.sources.ibnetdiscover import bulk, parse_ibnetdiscover
from topograph_slurm.sources.sim import (
    SHARP_DESCRIPTION,
    SimSpec,
    SimSpecError,
    format_sim_spec,
    generate_ibnetdiscover,
    generate_storage_ibnetdiscover,
    parse_sim_spec,
    write_ibnetdiscover,
)


def _fabric(spec: str) -> Fabric:
    return parse_ibnetdiscover(generate_ibnetdiscover(parse_sim_spec(spec)), "sim")


def _switch_kinds(fab: Fabric) -> Counter[str]:
    """leaf / spine / core, from the MF0;<name>:<model> descriptions."""
    return Counter(sw.description.split(";")[1].split("-")[0] for sw in fab.switches.values())


def _components(fab: Fabric) -> int:
    parent = {g: g for g in [*fab.switches, *fab.cas]}

    def find(g: str) -> str:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for link in fab.links:
        parent[find(link.a_guid)] = find(link.b_guid)
    return len({find(g) for g in parent})


def _leaf_of(fab: Fabric, host_hca: str) -> str:
    ca = next(g for g, c in fab.cas.items() if c.description == host_hca)
    link = next(link for link in fab.links if ca in (link.a_guid, link.b_guid))
    return fab.switches[link.peer(ca)].description


# ---------------------------------------------------------------------------------------------
# spec parsing


def test_defaults_and_parse() -> None:
    spec = parse_sim_spec("nodes=64,gpus=8,rails=8,su=32,tiers=2")
    assert spec == SimSpec()
    full = parse_sim_spec(
        " nodes=128, rails=4,su=16,tiers=3,islands=2,storage=1,sharp=yes,prefix=dgx,speed=hdr,"
        "pod=2,disagree=dgx0005,degraded=3"
    )
    assert (full.nodes, full.rails, full.su, full.tiers, full.islands) == (128, 4, 16, 3, 2)
    assert (full.storage, full.sharp, full.prefix, full.speed) == (True, True, "dgx", "HDR")
    assert (full.pod, full.disagree, full.degraded) == (2, "dgx0005", 3)
    assert parse_sim_spec(format_sim_spec(full)) == full
    assert parse_sim_spec("") == SimSpec()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes=64,colour=blue", "unknown key 'colour'"),
        ("nodes=sixty", "nodes must be an integer"),
        ("nodes=4,nodes=8", "given twice"),
        ("nodes", "expected key=value"),
        ("tiers=4", "tiers must be 2 or 3"),
        ("nodes=0", "nodes must be >= 1"),
        ("speed=QDR", "speed must be one of"),
        ("prefix=9bad", "prefix must match"),
        ("sharp=maybe", "sharp must be 0 or 1"),
        ("nodes=16,disagree=gpu0003", "at least two scalable units"),
        ("nodes=64,disagree=gpu9999", "not a simulated node"),
        ("nodes=4,rails=2,degraded=9", "exceeds the 8 node links"),
        ("nodes=2048,tiers=2", "use tiers=3"),
        ("nodes=100000000", "nodes must be <= 65,536, got 100,000,000"),
        ("su=128", "su must be <= 127"),
        ("nodes=1_000", "nodes must be an integer"),
        ("nodes=\u0664", "nodes must be an integer"),
        ("nodes=" + "9" * 5000, "nodes must be an integer"),
    ],
)
def test_bad_specs(text: str, message: str) -> None:
    with pytest.raises(SimSpecError, match=message) as err:
        spec = parse_sim_spec(text)
        generate_ibnetdiscover(spec)  # tiers=2 too large is found while building
    assert isinstance(err.value, ValueError) and isinstance(err.value, UsageError)


# ---------------------------------------------------------------------------------------------
# shapes, round-tripped through the real parser


def test_two_tier_shape() -> None:
    # 2 SUs x 8 rails = 16 leaves; 16 x 32 uplinks / radix 64 = 8 spines
    fab = _fabric("nodes=64,rails=8,su=32,tiers=2")
    assert _switch_kinds(fab) == Counter({"leaf": 16, "spine": 8})
    assert len(fab.cas) == 64 * 8
    assert len(fab.links) == 64 * 8 + 16 * 32
    assert _components(fab) == 1
    assert {(link.width, link.speed) for link in fab.links} == {("4x", "NDR")}
    assert fab.notes == []
    # rail r of every node in SU 1 sits on leaf su001-r<r>
    assert _leaf_of(fab, "gpu0007 mlx5_3") == "MF0;leaf-su001-r3:MQM9790/U1"
    assert _leaf_of(fab, "gpu0033 mlx5_3") == "MF0;leaf-su002-r3:MQM9790/U1"


def test_b200_superpod_three_tier_shape() -> None:
    """2,048 nodes, SU 32, 8 rails: 512 leaf + 512 spine + 256 core switches."""
    fab = _fabric("nodes=2048,su=32,tiers=3")
    assert _switch_kinds(fab) == Counter({"leaf": 512, "spine": 512, "core": 256})
    assert len(fab.cas) == 2048 * 8
    assert len(fab.links) == 3 * 2048 * 8  # host, leaf-spine and spine-core cables
    assert _components(fab) == 1


def test_small_three_tier_with_pods() -> None:
    # 8 SUs of 8 nodes x 4 rails = 32 leaves; pods of 2 SUs = 8 leaves; 4 pods x 8 spines;
    # 8 core groups of ceil(4 x 32 / 64) = 2 cores
    fab = _fabric("nodes=64,rails=4,su=8,tiers=3,pod=2")
    assert _switch_kinds(fab) == Counter({"leaf": 32, "spine": 32, "core": 16})
    assert len(fab.links) == 64 * 4 + 32 * 8 + 32 * 32
    assert _components(fab) == 1


def test_partial_su() -> None:
    fab = _fabric("nodes=5,rails=2,su=32,tiers=2")
    assert _switch_kinds(fab) == Counter({"leaf": 2, "spine": 1})
    assert len(fab.cas) == 10


def test_two_islands_are_disconnected() -> None:
    fab = _fabric("nodes=100,su=32,tiers=2,islands=2")
    assert _components(fab) == 2
    assert len(fab.cas) == 800
    # island 1 holds gpu0001-gpu0050 on its own leaves
    assert _leaf_of(fab, "gpu0051 mlx5_0") == "MF0;i2-leaf-su001-r0:MQM9790/U1"


def test_sharp_nodes_per_switch() -> None:
    fab = _fabric("nodes=64,su=32,tiers=2,sharp=1")
    sharp = [ca for ca in fab.cas.values() if ca.description == SHARP_DESCRIPTION]
    assert len(sharp) == len(fab.switches) == 24
    assert len(fab.cas) == 64 * 8 + 24


def test_disagreeing_node() -> None:
    fab = _fabric("nodes=64,su=16,disagree=gpu0003")
    assert _leaf_of(fab, "gpu0003 mlx5_6") == "MF0;leaf-su001-r6:MQM9790/U1"
    assert _leaf_of(fab, "gpu0003 mlx5_7") == "MF0;leaf-su002-r7:MQM9790/U1"
    same_by_index = _fabric("nodes=64,su=16,disagree=3")
    assert same_by_index.links == fab.links


def test_degraded_links() -> None:
    fab = _fabric("nodes=64,su=16,degraded=3")
    widths = Counter(link.width + link.speed for link in fab.links)
    assert widths == Counter({"4xNDR": len(fab.links) - 3, "1xNDR": 2, "4xSDR": 1})


def test_storage_fabric() -> None:
    spec = parse_sim_spec("nodes=64,rails=8,storage=1")
    fab = parse_ibnetdiscover(generate_storage_ibnetdiscover(spec))
    hosts = Counter(ca.description.split()[0] for ca in fab.cas.values())
    assert hosts["gpu0001"] == 2  # mlx5_8 and mlx5_9
    assert sum(h.startswith("stor-") for h in hosts) == 4
    assert len(fab.cas) == 64 * 2 + 4
    assert _components(fab) == 1
    compute = parse_ibnetdiscover(generate_ibnetdiscover(replace(spec, storage=False)))
    compute_guids = compute.cas.keys() | compute.switches.keys()
    assert not compute_guids & (fab.cas.keys() | fab.switches.keys())
    switch_names = {sw.description.split(";")[1].split(":")[0] for sw in fab.switches.values()}
    assert all(name.startswith("stor-") for name in switch_names)


def test_storage_subnet_follows_the_compute_fabric_in_the_dump() -> None:
    """``storage=1`` writes both subnets, as two ibnetdiscover runs into one file would."""
    spec = parse_sim_spec("nodes=64,rails=8,storage=1")
    both = generate_ibnetdiscover(spec)
    compute = generate_ibnetdiscover(replace(spec, storage=False))
    storage = generate_storage_ibnetdiscover(spec)
    assert both.endswith(storage)
    assert both[: -len(storage)].splitlines()[2:] == compute.splitlines()[2:]  # but the spec line
    fab = parse_ibnetdiscover(both)
    assert len(fab.cas) == 64 * 8 + 64 * 2 + 4
    assert _components(fab) == 2
    assert not fab.notes  # no GUID is shared between the subnets


@pytest.mark.parametrize(
    "spec",
    [
        "nodes=2080,rails=8,su=8,tiers=3",  # more cores per group than spine uplinks
        "nodes=512,rails=8,su=1,tiers=3",  # exactly twice as many: pods must still meet
        "nodes=3000,rails=4,su=8,tiers=3",  # fewer, not a divisor of the uplinks
    ],
)
def test_three_tier_cores_are_all_cabled_within_their_radix(spec: str) -> None:
    """Spine uplinks are dealt evenly over every core of their group (at 16k nodes half the
    cores used to be unconnected, and uneven groups put 94 cables on 64-port cores)."""
    fab = _fabric(spec)
    cabled = Counter(
        guid for link in fab.links for guid in (link.a_guid, link.b_guid) if guid in fab.switches
    )
    assert set(cabled) == set(fab.switches)
    assert all(cabled[guid] <= sw.nports for guid, sw in fab.switches.items())
    assert _components(fab) == 1


def test_hdr_hardware() -> None:
    text = generate_ibnetdiscover(parse_sim_spec("nodes=4,rails=1,speed=HDR"))
    assert "MQM8700" in text and "devid=0x101b" in text and "4xHDR" in text


# ---------------------------------------------------------------------------------------------
# text properties


def test_real_plain_format() -> None:
    text = generate_ibnetdiscover(parse_sim_spec("nodes=2,rails=1,su=2"))
    assert (
        'Switch\t65 "S-0002c90100000000"\t\t# "MF0;leaf-su001-r0:MQM9790/U1" '
        "enhanced port 0 lid 1 lmc 0\n" in text
    )
    assert (
        '[1]\t"H-0002c90000000000"[1](2c90000000000) \t\t# "gpu0001 mlx5_0" lid 3 4xNDR\n' in text
    )
    assert 'Ca\t1 "H-0002c90000000000"\t\t# "gpu0001 mlx5_0"\n' in text
    assert "caguid=0x2c90000000000\n" in text


def test_deterministic_and_streaming() -> None:
    spec = parse_sim_spec("nodes=96,su=16,tiers=3,sharp=1,islands=2,disagree=5,degraded=4")
    first = generate_ibnetdiscover(spec)
    assert first == generate_ibnetdiscover(parse_sim_spec(format_sim_spec(spec)))
    buf = io.StringIO()
    write_ibnetdiscover(spec, buf)
    assert buf.getvalue() == first


def test_guids_unique_and_fast_path_used() -> None:
    text = generate_ibnetdiscover(parse_sim_spec("nodes=256,su=32,tiers=3,sharp=1"))
    fab = bulk.parse(text, "")
    assert fab is not None, "simulated dumps must take the parser's bulk path"
    headers = [line for line in text.splitlines() if line.startswith(("Switch", "Ca"))]
    assert len(headers) == len(fab.switches) + len(fab.cas)


def test_scale_smoke_2048_nodes() -> None:
    spec = parse_sim_spec("nodes=2048,su=32,tiers=3")
    start = time.perf_counter()
    text = generate_ibnetdiscover(spec)
    fab = parse_ibnetdiscover(text)
    elapsed = time.perf_counter() - start
    assert len(fab.cas) == 16384 and len(fab.links) == 49152
    assert elapsed < 60, f"2,048-node sim + parse took {elapsed:.1f}s"
