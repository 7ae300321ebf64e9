"""NetQ as a fabric source: the real topology graph (NVIDIA topograph's recorded answer) read
by hand and by the translation, and the same answer replayed by a NetQ stand-in on loopback
through the real appliance client (TLS, login, premises, bearer tokens)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import real_fixture
from tests.support.netq_standin import NetqHandler, NetqState
from tests.support.ufm_standin import Pki, Standin, make_pki, serve
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.cli.main import main
from topograph_slurm.errors import AuthError, CollectError, ParseError
from topograph_slurm.sources.netq import collect_netq, fabric_from_netq, fetch_netq
from topograph_slurm.sources.netq.translate import OTHER_PORTS, switch_port
from topograph_slurm.sources.ufm import FetchOptions, UfmCredentials
from topograph_slurm.sources.ufm.credentials import NETQ

GRAPH = "netq/netq-topologyGraph-spectrum-roce.json"
USER, PASSWORD = "netq-admin", "n3tq-S3cret-QQ"
CREDS = UfmCredentials(USER, PASSWORD, origin="test", appliance=NETQ)

# Counted by reading the JSON: tier 1 holds the switches node0 "net-unit-l1" and node9
# "net-unit-l2", tier 2 node3 "net-unit-s1", tier -1 the hosts dgx-01..dgx-08. Every host's
# four NICs (ens4f0np0, ens1f0np1, ens4f1np2, ens1f1np3) go to one tier-1 switch: dgx-01..04
# (node21, node24, node22, node2) to node0 on swp17s0..swp20s3, dgx-05..08 (node12, node19,
# node25, node7) to node9. node0-node3 is a compounded link of 28 cables, node3-node9 of 19.
LEAVES = {
    "net-unit-l1": ["dgx-01", "dgx-02", "dgx-03", "dgx-04"],
    "net-unit-l2": ["dgx-05", "dgx-06", "dgx-07", "dgx-08"],
}
SPINES = ["net-unit-s1"]
CABLES = 8 * 4 + 28 + 19


def _graph() -> bytes:
    return real_fixture(GRAPH).read_bytes()


def test_the_real_graph_gives_the_hand_counted_tree() -> None:
    fabric = fabric_from_netq([_graph()])
    assert sorted(s.description for s in fabric.switches.values()) == [*LEAVES, *SPINES]
    assert len(fabric.cas) == 8 * 4
    assert len(fabric.links) == CABLES
    analysis = analyse(fabric, NamingPolicy())
    assert {leaf.name: leaf.nodes for leaf in analysis.tree.leaves} == LEAVES
    assert [upper.name for upper in analysis.tree.uppers] == SPINES
    assert analysis.tree.uppers[0].children == list(LEAVES)
    assert analysis.tree.tops == SPINES
    assert not [f for f in analysis.findings if f.level == "problem"]


def test_host_nics_become_cas_described_as_hcas_are() -> None:
    descriptions = {ca.description for ca in fabric_from_netq([_graph()]).cas.values()}
    assert "dgx-05 ens1f0np1" in descriptions
    assert {d.split()[1] for d in descriptions} == {
        "ens4f0np0",
        "ens1f0np1",
        "ens4f1np2",
        "ens1f1np3",
    }


def test_cumulus_ports_and_breakouts_are_numbered_readably() -> None:
    assert switch_port("swp17s0") == 1701
    assert switch_port("swp20s3") == 2004
    assert switch_port("swp36") == 3600
    assert switch_port("eth0") is None
    ports = {port for link in fabric_from_netq([_graph()]).links for port in link[1::2][:2]}
    assert {1701, 2004, 3600} <= ports
    assert all(port < OTHER_PORTS for port in ports)


def test_a_cable_listed_twice_is_one_cable_and_rates_are_noted_unknown() -> None:
    graph = _graph()
    fabric = fabric_from_netq([graph, graph])
    assert len(fabric.links) == CABLES
    assert [note.kind for note in fabric.notes] == ["unrated"]


def test_a_graph_of_the_wrong_shape_is_one_parse_error() -> None:
    with pytest.raises(ParseError, match=r"netq\[0\]"):
        fabric_from_netq([b'[{"nodes": "no", "links": []}]'])


# --------------------------------------------------------------------------------------------
# Through the real client, against a stand-in on loopback


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def standin(pki: Pki) -> Iterator[Standin]:
    state = NetqState(_graph(), USER, PASSWORD)
    with serve(pki, state, handler=NetqHandler) as running:
        yield running


def _opts(pki: Pki, **kwargs: object) -> FetchOptions:
    return FetchOptions(ca_bundle=pki.ca, backoff=0.0, retries=1, **kwargs)  # type: ignore[arg-type]


def test_the_stand_in_replays_the_real_graph_through_the_client(standin: Standin, pki: Pki) -> None:
    answer = fetch_netq(standin.url, CREDS, _opts(pki))
    assert answer.graphs == (_graph().decode(),)
    methods = [(method, path) for method, path, _ in standin.state.requests]
    assert methods == [
        ("POST", "/api/netq/auth/v1/login"),
        ("GET", "/api/netq/auth/v1/select/opid/7"),  # premises 8 has no data
        ("POST", "/api/netq/telemetry/v1/object/topologygraph/fetch-topology?timestamp=0"),
    ]
    fabric = fabric_from_netq(answer.graphs)
    tree = analyse(fabric, NamingPolicy()).tree
    assert {leaf.name: leaf.nodes for leaf in tree.leaves} == LEAVES


def test_credentials_come_from_the_environment_as_ufms_do(standin: Standin, pki: Pki) -> None:
    env = {"NETQ_USERNAME": USER, "NETQ_PASSWORD": PASSWORD, "UFM_USERNAME": "not-this"}
    assert collect_netq(standin.url, None, _opts(pki), env=env).graphs
    with pytest.raises(AuthError, match="no NetQ credentials: give --netq-credentials FILE"):
        collect_netq(standin.url, None, _opts(pki), env={"UFM_USERNAME": USER})


def test_a_readable_credentials_file_is_refused_as_ufms_is(tmp_path: Path, pki: Pki) -> None:
    creds = tmp_path / "netq.cred"
    creds.write_text(f"username: {USER}\npassword: {PASSWORD}\n")
    creds.chmod(0o644)
    with pytest.raises(AuthError, match=r"NetQ credentials file .* readable by group"):
        collect_netq("https://127.0.0.1:1", creds, _opts(pki), env={})


@pytest.mark.parametrize(
    ("fault", "error", "match"),
    [
        ("401", AuthError, r"NetQ at https://127\.0\.0\.1:\d+ rejected the basic credentials"),
        ("500", CollectError, r"fetch-topology\?timestamp=0 failed with HTTP 500"),
        ("token", AuthError, "gave no usable access token"),
    ],
)
def test_failures_are_one_line_without_the_password(
    standin: Standin, pki: Pki, fault: str, error: type[Exception], match: str
) -> None:
    standin.state.fault = fault
    with pytest.raises(error, match=match) as caught:
        fetch_netq(standin.url, CREDS, _opts(pki))
    assert PASSWORD not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unknown_ca_names_netqs_flags(standin: Standin, pki: Pki) -> None:
    with pytest.raises(CollectError, match=r"give --netq-ca-bundle FILE .*--netq-insecure"):
        fetch_netq(standin.url, CREDS, FetchOptions(ca_bundle=pki.other_ca, retries=0))


def test_a_token_is_refused_netq_takes_a_password(standin: Standin, pki: Pki) -> None:
    token = UfmCredentials(token="abc", origin="test", appliance=NETQ)
    with pytest.raises(AuthError, match="NetQ takes a username and password"):
        fetch_netq(standin.url, token, _opts(pki))


def test_generate_netq_writes_the_tree(standin: Standin, pki: Pki, tmp_path: Path) -> None:
    creds = tmp_path / "netq.cred"
    creds.write_text(f"username: {USER}\npassword: {PASSWORD}\n")
    creds.chmod(0o600)
    out = tmp_path / "topology.conf"
    args = ["--config", os.devnull, "generate", "--netq", standin.url, "--netq-credentials"]
    args += [str(creds), "--netq-ca-bundle", str(pki.ca), "--slurm-nodes", "all", "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "SwitchName=net-unit-l1 Nodes=dgx-[01-04]" in text
    assert "SwitchName=net-unit-s1 Switches=net-unit-l1,net-unit-l2" in text
    assert PASSWORD not in result.output


def test_a_single_cable_link_and_a_cable_to_an_unlisted_device() -> None:
    graph = {
        "nodes": [
            {"compounded_nodes": [{"id": "n1", "name": "leaf1", "device_type": "switch"}]},
            {"compounded_nodes": [{"id": "n2", "name": "gpu1", "device_type": "host"}]},
        ],
        "links": [
            {
                "id": "n1-*-n2",
                "interfaces": [
                    {"node": "n1", "interface": "swp3s1"},
                    {"node": "n2", "interface": "eth0"},
                ],
            },
            {
                "compounded_links": [
                    {
                        "interfaces": [
                            {"node": "n1", "interface": "eth0"},
                            {"node": "n9", "interface": "x"},
                        ]
                    }
                ]
            },
        ],
    }
    fabric = fabric_from_netq([json.dumps([graph])])
    (link,) = fabric.links
    assert {link.a_port, link.b_port} == {302, 1}
    assert [(n.kind, n.guid) for n in fabric.notes] == [("dangling", "n9"), ("unrated", "links")]
