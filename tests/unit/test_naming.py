"""Host and switch naming: every CA is a node rail or an exclusion with a reason."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.fabric_builder import FabricBuilder
from topograph_slurm.analysis.fabric import naming
from topograph_slurm.analysis.fabric.adjacency import adjacency
from topograph_slurm.analysis.fabric.naming import NamingPolicy, name_switches
from topograph_slurm.errors import ConfigError, InputError
from topograph_slurm.model import names
from topograph_slurm.model.fabric import Fabric
from topograph_slurm.model.result import HostAttachments
from topograph_slurm.sources.node_name_map import parse_node_name_map


def attach_hosts(fabric: Fabric, policy: NamingPolicy, names: dict[str, str]) -> HostAttachments:
    return naming.attach_hosts(fabric, policy, names, adjacency(fabric).ca_leaves)


def _fabric_with_oddities() -> FabricBuilder:
    fb = FabricBuilder()
    fb.switch("leaf1")
    fb.host("gpu01", ["leaf1"])
    fb.ca("sharp", "Mellanox Technologies Aggregation Node")
    fb.cable("sharp", "leaf1")
    fb.ca("fw", "MT4129 ConnectX7   Mellanox Technologies")
    fb.cable("fw", "leaf1")
    fb.ca("lo", "localhost mlx5_0")
    fb.cable("lo", "leaf1")
    fb.ca("ufm", "ufm01 mlx5_0")
    fb.cable("ufm", "leaf1")
    fb.ca("odd", 'bad"name mlx5_0')
    fb.cable("odd", "leaf1")
    fb.ca("loose", "gpu09 mlx5_0")  # no cable
    return fb


def test_every_ca_is_a_rail_or_an_exclusion_with_reason() -> None:
    fb = _fabric_with_oddities()
    policy = NamingPolicy(slurm_nodes=frozenset({"gpu01", "gpu09"}))
    hosts = attach_hosts(fb.fabric, policy, name_switches(fb.fabric))
    assert hosts.nodes == ["gpu01"]
    reasons = {ex.description: (ex.reason, ex.leaf) for ex in hosts.exclusions}
    assert reasons == {
        "Mellanox Technologies Aggregation Node": (naming.REASON_SHARP, "leaf1"),
        "MT4129 ConnectX7   Mellanox Technologies": (naming.REASON_DEFAULT, "leaf1"),
        "localhost mlx5_0": (naming.REASON_LOCALHOST, "leaf1"),
        "ufm01 mlx5_0": (naming.REASON_OUTSIDE, "leaf1"),
        'bad"name mlx5_0': (naming.REASON_UNSAFE, "leaf1"),
        "gpu09 mlx5_0": (naming.REASON_NO_LINK, ""),
    }
    assert len(hosts.exclusions) + 1 == len(fb.fabric.cas)


def test_node_name_map_rescues_a_firmware_default_hca() -> None:
    fb = _fabric_with_oddities()
    guid = fb.guids["fw"]
    mapping = parse_node_name_map(f'# comment\n0x{guid.lstrip("0")} "gpu02 mlx5_0"\n')
    hosts = attach_hosts(fb.fabric, NamingPolicy(node_name_map=mapping), name_switches(fb.fabric))
    assert "gpu02" in hosts.nodes


def test_rewrite_rescues_oddly_named_hcas() -> None:
    fb = FabricBuilder()
    fb.switch("leaf1")
    fb.ca("x", "HCA-1 on node-7")
    fb.cable("x", "leaf1")
    rules = naming.compile_rewrites([(r"^HCA-\d+ on (\S+)$", r"\1 hca")])
    hosts = attach_hosts(fb.fabric, NamingPolicy(rewrites=rules), name_switches(fb.fabric))
    assert hosts.nodes == ["node-7"]


def test_bad_rewrite_and_bad_map_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="invalid rewrite pattern"):
        naming.compile_rewrites([("(", "x")])
    with pytest.raises(InputError, match="map:2"):
        parse_node_name_map('0x1 "a"\nnot-a-guid "b"\n', "map")


#: ``(a|aa|aaa)+`` matches a run of a's in exponentially many ways, all tried before ``b``
#: fails; a sane pattern takes microseconds on the same text.
CATASTROPHIC = "(a|aa|aaa)+b"
LONG_A = "a" * 40 + "0001 mlx5_0"


@pytest.mark.parametrize("flag", ["rewrite", "--hcas"])
def test_a_catastrophically_backtracking_pattern_is_stopped_with_one_error(flag: str) -> None:
    if flag == "rewrite":
        policy = NamingPolicy(rewrites=naming.compile_rewrites([(CATASTROPHIC, "x")]))
        desc = LONG_A
    else:
        policy = NamingPolicy(hcas=naming.compile_hcas(CATASTROPHIC))
        desc = "gpu01 " + "a" * 40
    message = rf"{flag} pattern {re.escape(repr(CATASTROPHIC))} took over 1 s"
    with pytest.raises(ConfigError, match=message):
        naming.host_of(desc, policy)
    assert naming.host_of("gpu01 mlx5_0", policy)[0] in ("gpu01", None)


def test_switch_names_from_mf0_unique_and_guid_fallback() -> None:
    fb = FabricBuilder()
    a = fb.switch("A", "MF0;leaf-01:MQM9790/U1")
    b = fb.switch("B", "MF0;dup:MQM9790/U1")
    c = fb.switch("C", "MF0;dup:MQM9790/U1")
    d = fb.switch("D", "Quantum Mellanox Technologies")
    e = fb.switch("E", "ib-i1l1s01")
    names = name_switches(fb.fabric)
    assert names[a] == "leaf-01"
    assert names[b] == f"sw-{b}" and names[c] == f"sw-{c}"
    assert names[d] == f"sw-{d}"
    assert names[e] == "ib-i1l1s01"


@given(st.text())
def test_sanitised_switch_names_are_slurm_safe(raw: str) -> None:
    name = names.sanitize(raw)
    assert name == "" or names.SLURM_NAME.match(name)


@given(st.text(min_size=1))
def test_hosts_from_arbitrary_descriptions_are_slurm_safe(desc: str) -> None:
    host, reason = naming.host_of(desc, NamingPolicy())
    assert (host is None and reason) or (host is not None and names.SLURM_NAME.match(host))


_RAIL = st.integers(0, 7)
_DESCRIPTION = st.one_of(
    st.builds(
        "{} mlx5_{}".format,
        st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
        st.integers(0, 7),
    ),
    st.sampled_from(
        [
            "localhost mlx5_0",
            "LocalHost.LocalDomain mlx5_1",
            "gpu1\tmlx5_0",
            "gpu2\rmlx5_0",
            "gpu3\nmlx5_0",
            "gpu4\x1cmlx5_0",
            "  gpu5  ",
            "Mellanox Technologies Aggregation Node",
            "gpü6 mlx5_0",
            "",
        ]
    ),
    st.text(max_size=12),
)


@given(st.lists(_DESCRIPTION, min_size=1, max_size=8))
def test_bulk_host_names_agree_with_one_by_one(descriptions: list[str]) -> None:
    """The whole-list shortcut gives what host_of gives CA by CA, or declines."""
    policy = NamingPolicy()
    one_by_one = [naming.host_of(desc, policy)[0] for desc in descriptions]
    bulk = naming._plain_hosts(descriptions, policy)
    assert bulk is None or bulk == one_by_one
    if all(host is not None for host in one_by_one) and not any("\n" in d for d in descriptions):
        assert bulk == one_by_one, "a list of valid hosts takes the shortcut"
