"""The UFM source: credentials, the HTTPS client against a real loopback stand-in, snapshots,
and — the point of it all — the same Fabric and byte-identical topology.conf as ibnetdiscover.

Every fabric (simulated and real dumps) goes ibnetdiscover text → parser → Fabric → UFM JSON
(stand-in) → HTTPS → :func:`fetch_ufm` → :func:`fabric_from_ufm`, and must come back equal.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import real_fixture
from tests.support.ufm import parse_systems, store_responses
from tests.support.ufm_standin import (
    Pki,
    Standin,
    StandinState,
    make_pki,
    serve,
    ufm_json_from_fabric,
)
from topograph_slurm.analysis.fabric.analyse import analyse, ib_blocks
from topograph_slurm.analysis.fabric.naming import NamingPolicy, name_switches
from topograph_slurm.errors import (
    AuthError,
    CollectError,
    Exit,
    InputError,
    ParseError,
    TopographError,
    UsageError,
)
from topograph_slurm.model.fabric import Fabric, Link
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import environment, render
from topograph_slurm.sources import sim
from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover, read_ibnetdiscover
from topograph_slurm.sources.ufm import (
    MIB,
    FetchOptions,
    UfmCredentials,
    UfmInsecureWarning,
    UfmResponses,
    collect_ufm,
    fabric_from_ufm,
    fetch_ufm,
    has_snapshot,
    load_credentials,
    load_responses,
    snapshot_files,
    ufm_speed,
    ufm_width,
)

USER, PASSWORD, TOKEN = "ufmadmin", "pa55-w0rd-XYZZY", "tok-3f9a7c1e5b2d4680aa"
SECRETS = (PASSWORD, TOKEN)
BASIC = UfmCredentials(USER, PASSWORD, origin="test")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _state(fabric: Fabric, **kwargs: Any) -> StandinState:
    kwargs.setdefault("username", USER)
    kwargs.setdefault("password", PASSWORD)
    kwargs.setdefault("token", TOKEN)
    return StandinState(ufm_json_from_fabric(fabric), **kwargs)


@pytest.fixture(scope="module")
def small_fabric() -> Fabric:
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=8,rails=2,su=4"))
    return parse_ibnetdiscover(text, "sim")


@pytest.fixture
def standin(pki: Pki, small_fabric: Fabric) -> Iterator[Standin]:
    with serve(pki, _state(small_fabric)) as running:
        yield running


def _opts(pki: Pki, **kwargs: Any) -> FetchOptions:
    kwargs.setdefault("ca_bundle", pki.ca)
    kwargs.setdefault("backoff", 0.0)
    return FetchOptions(**kwargs)


def _assert_clean(text: str) -> None:
    """No secret in a message, a log or any output."""
    for secret in SECRETS:
        assert secret not in text


# --------------------------------------------------------------------------------------------
# Same fabric as ibnetdiscover


SIM_SPECS = [
    "nodes=64",
    "nodes=64,sharp=1",
    "nodes=96,su=32,tiers=3",
    "nodes=64,islands=2",
    "nodes=64,disagree=gpu0001,degraded=6",
    "nodes=16,rails=4,su=8,speed=HDR",
]
REAL_DUMPS = [
    "dgx-superpod-ndr-quantum2-mqm9701.txt",
    "mellanox-ufm-lab-small-fdr-edr-hdr.txt",
    "nvidia-kb-edr-fdr-qdr-sdr-loopbacks-ibwarn.txt",
    "loginoff-2014-sx6036-fdr-qdr-8sw-144ca.txt",
    "psmn-x5-qdr-ddr-voltaire-mellanox.txt",
    "manpage-2007-voltaire-isr9024-grouped-nonchassis.txt",
    "oracle-sun-dcs36-qdr-1sw-1ca.txt",
    "ibm-pcm-2009-sdr-1sw-2ca.txt",
    "dgx-gb200-single-isolated-ca.txt",
]


def _via_ufm(pki: Pki, fabric: Fabric) -> Fabric:
    with serve(pki, _state(fabric)) as running:
        responses = fetch_ufm(running.url, BASIC, _opts(pki))
    return fabric_from_ufm(responses)


def _assert_same_model(expected: Fabric, got: Fabric) -> None:
    assert {g: (s.description, s.lid) for g, s in got.switches.items()} == {
        g: (s.description, s.lid) for g, s in expected.switches.items()
    }
    assert {g: c.description for g, c in got.cas.items()} == {
        g: c.description for g, c in expected.cas.items()
    }
    assert _links(got) == _links(expected)
    assert name_switches(got) == name_switches(expected)


def _links(fabric: Fabric) -> list[Link]:
    """Links in one order: sources may list cables in any order, the model's content counts."""
    return sorted(fabric.links, key=lambda k: (k.a_guid, k.a_port, k.b_guid, k.b_port))


def _topology(fabric: Fabric, fmt: str) -> str:
    """topology.conf exactly as ``generate`` renders it, or the error it would stop with."""
    try:
        analysis = analyse(fabric, NamingPolicy())
        env = environment()
        if fmt == "tree":
            return render(
                env,
                "topology.conf.tree.j2",
                tree=analysis.tree,
                blocks=None,
                node_count=analysis.node_count,
            )
        blocks = ib_blocks(analysis, SlurmVersion.parse("25.05"))
        return render(
            env,
            "topology.conf.block.j2",
            tree=analysis.tree,
            blocks=blocks,
            node_count=sum(len(b.nodes) for b in blocks.blocks),
        )
    except TopographError as err:
        return f"error {type(err).__name__}: {err}"


def _assert_same_output(expected: Fabric, got: Fabric) -> None:
    for fmt in ("tree", "block"):
        assert _topology(got, fmt) == _topology(expected, fmt), fmt
    a, b = analyse(expected, NamingPolicy()), analyse(got, NamingPolicy())
    assert a.exclusions == b.exclusions
    assert [f.message for f in a.findings] == [f.message for f in b.findings]


@pytest.mark.parametrize("spec", SIM_SPECS)
def test_sim_fabric_through_ufm_matches_ibnetdiscover(pki: Pki, spec: str) -> None:
    expected = parse_ibnetdiscover(sim.generate_ibnetdiscover(sim.parse_sim_spec(spec)), spec)
    got = _via_ufm(pki, expected)
    _assert_same_model(expected, got)
    _assert_same_output(expected, got)
    assert "SwitchName=" in _topology(got, "tree")
    assert "BlockName=" in _topology(got, "block")


@pytest.mark.parametrize("name", REAL_DUMPS)
def test_real_dump_through_ufm_matches_ibnetdiscover(pki: Pki, name: str) -> None:
    expected = read_ibnetdiscover(real_fixture(f"ibnetdiscover/{name}"))
    got = _via_ufm(pki, expected)
    _assert_same_model(expected, got)
    _assert_same_output(expected, got)


def test_ndr_superpod_gives_a_real_topology(pki: Pki) -> None:
    expected = read_ibnetdiscover(
        real_fixture("ibnetdiscover/dgx-superpod-ndr-quantum2-mqm9701.txt")
    )
    got = _via_ufm(pki, expected)
    tree = _topology(got, "tree")
    assert tree == _topology(expected, "tree")
    assert "SwitchName=A09-P1-IBLEAF" in tree
    sharp = [c for c in got.cas.values() if "Aggregation Node" in c.description]
    assert sharp, "SHARP aggregation nodes must stay in the model (and be excluded by naming)"


@pytest.mark.slow
def test_selene_compute_fabric_matches(pki: Pki) -> None:
    """666 switches, 4,341 CAs, ~13 MB of ports JSON: the big real case."""
    expected = read_ibnetdiscover(
        real_fixture("ibnetdiscover/nvidia-selene-compute-hdr-quantum.txt")
    )
    got = _via_ufm(pki, expected)
    _assert_same_model(expected, got)
    assert _topology(got, "tree") == _topology(expected, "tree")


# --------------------------------------------------------------------------------------------
# Real UFM systems responses

REAL_SYSTEMS = {
    "ibm-csm-ufm59-systems-msb7800-edr.json": ("248a070300fd6100", "c650f04ib-leaf02-M"),
    "ibm-csm-ufm61-systems-msb7800-edr.json": ("248a0703006d4090", "c650f07ib-leaf03-M"),
    "ibm-csm-ufm-systems-full-modules-rst-indented.json": (
        "248a070300fd6100",
        "c650f04ib-leaf02-M",
    ),
    "ibm-csm-ufm-systems-missing-modules-rst-indented.json": (
        "248a070300fcccd0",
        "c650f03ib-root01-M",
    ),
}


@pytest.mark.parametrize("name", sorted(REAL_SYSTEMS))
def test_real_systems_responses_parse(name: str) -> None:
    text = real_fixture(f"ufm/{name}").read_text(encoding="utf-8")
    guid, system_name = REAL_SYSTEMS[name]
    (system,) = parse_systems(text, name)
    assert (system.guid, system.name, system.type, system.model) == (
        guid,
        system_name,
        "switch",
        "MSB7800",
    )
    fabric = fabric_from_ufm(UfmResponses(text, "[]", "[]", "[]", url=name))
    assert fabric.switches[guid].description == f"MF0;{system_name}:MSB7800/U1"
    assert name_switches(fabric) == {guid: system_name}


def test_director_asics_share_a_system_and_get_guid_names() -> None:
    """A director is one UFM system holding many switch ASICs; ibnetdiscover shows each ASIC
    as ``MF0;<chassis>:<model>/…`` and naming falls back to ``sw-<guid>`` for all of them."""
    chassis, asics = "0000000000000a00", ["0000000000000a01", "0000000000000a02"]
    systems = [{"system_guid": chassis, "type": "switch", "system_name": "dir1", "model": "CS7500"}]
    ports = [
        {"guid": g, "number": 1, "description": "Switch IB Port", "systemID": chassis}
        for g in asics
    ]
    links = [
        {
            "source_guid": asics[0],
            "source_port": "1",
            "destination_guid": asics[1],
            "destination_port": "1",
            "width": "4x",
        }
    ]
    fabric = fabric_from_ufm(
        UfmResponses(json.dumps(systems), json.dumps(ports), json.dumps(links), "[]")
    )
    assert sorted(fabric.switches) == asics
    assert set(name_switches(fabric).values()) == {f"sw-{g}" for g in asics}
    assert fabric.links[0].speed == "???"


def test_sharp_node_inside_a_switch_system_stays_a_ca(small_fabric: Fabric) -> None:
    """If UFM files a SHARP aggregation node's port under its switch (system and port type),
    it must still be a CA, or the switch would lose its name."""
    switch = sorted(small_fabric.switches)[0]
    sharp = "0002c9ff00000001"
    data = ufm_json_from_fabric(small_fabric)
    data["ports"].append(
        {
            "guid": sharp,
            "number": 1,
            "description": "Switch IB Port",
            "node_description": "Mellanox Technologies Aggregation Node",
            "systemID": switch,
            "peer": f"{switch}_65",
        }
    )
    fabric = fabric_from_ufm(UfmResponses(**{k: json.dumps(v) for k, v in data.items()}))
    assert sharp in fabric.cas
    assert name_switches(fabric) == name_switches(small_fabric)


def test_link_end_without_port_record_becomes_a_device_with_a_note() -> None:
    links = [
        {
            "source_guid": "0x1",
            "source_port": "3",
            "destination_guid": "0x2",
            "destination_port": "1",
            "width": "4X",
            "source_port_node_description": "leaf-1:3",
            "source_port_dname": "3",
            "destination_port_node_description": "node7 mlx5_0",
        }
    ]
    fabric = fabric_from_ufm(UfmResponses("[]", "[]", json.dumps(links), "[]"))
    assert fabric.switches["0000000000000001"].description == "leaf-1"
    assert fabric.cas["0000000000000002"].description == "node7 mlx5_0"
    assert fabric.links[0].width == "4x"
    assert [n.kind for n in fabric.notes].count("no-block") == 2


def test_cables_missing_from_links_are_taken_from_port_peers(small_fabric: Fabric) -> None:
    data = ufm_json_from_fabric(small_fabric)
    dropped = data["links"].pop(0)
    fabric = fabric_from_ufm(UfmResponses(**{k: json.dumps(v) for k, v in data.items()}))
    assert _links(fabric) == _links(small_fabric)
    assert any(
        n.kind == "ports-only-links" and n.message.startswith("1 cable") for n in fabric.notes
    )
    assert dropped["source_guid"] in fabric.switches or dropped["source_guid"] in fabric.cas


def test_unhealthy_ports_become_notes(pki: Pki, small_fabric: Fabric) -> None:
    ca = sorted(small_fabric.cas)[0]
    data = ufm_json_from_fabric(small_fabric, unhealthy=[(ca, 1)])
    state = StandinState(data, username=USER, password=PASSWORD)
    with serve(pki, state) as running:
        fabric = fabric_from_ufm(fetch_ufm(running.url, BASIC, _opts(pki)))
    (note,) = [n for n in fabric.notes if n.kind == "unhealthy-port"]
    assert note.guid == ca
    assert "HIGH_BER" in note.message and small_fabric.cas[ca].description in note.message


def test_different_end_speeds_keep_the_slower_and_note_it(small_fabric: Fabric) -> None:
    data = ufm_json_from_fabric(small_fabric)
    data["ports"][0]["active_speed"] = "EDR"
    texts = {k: json.dumps(v) for k, v in data.items()}
    fabric = fabric_from_ufm(UfmResponses(**texts))
    port = data["ports"][0]
    (link,) = [
        k
        for k in fabric.links
        if (port["guid"], port["number"]) in ((k.a_guid, k.a_port), (k.b_guid, k.b_port))
    ]
    assert link.speed == "EDR"
    assert any(n.kind == "link-mismatch" for n in fabric.notes)


@pytest.mark.parametrize(
    ("raw", "width", "name"),
    [
        ("HDR", "4x", "HDR"),
        ("ndr", "4x", "NDR"),
        ("FDR10", "4x", "FDR10"),
        ("53.125 Gbps", "4x", "HDR"),
        ("25.78125", "4x", "EDR"),
        ("200 Gb/s", "4x", "HDR"),
        ("400Gbps", "4x", "NDR"),
        ("N/A", "4x", "???"),
        ("", "4x", "???"),
        (None, "4x", "???"),
        ("weird", "4x", "WEIRD"),
    ],
)
def test_ufm_speed(raw: object, width: str, name: str) -> None:
    assert ufm_speed(raw, width) == name


@pytest.mark.parametrize(
    ("raw", "width"),
    [
        ("4x", "4x"),
        ("4X", "4x"),
        ("x2", "2x"),
        ("1", "1x"),
        ("N/A", "???"),
        ("\u0664x", "???"),
        ("\u00b2x", "???"),
        ("9" * 5000, "???"),
    ],
)
def test_ufm_width(raw: str, width: str) -> None:
    assert ufm_width(raw) == width


# --------------------------------------------------------------------------------------------
# Authentication variants


def test_basic_auth_uses_ufmrest_and_a_basic_header(standin: Standin, pki: Pki) -> None:
    fetch_ufm(standin.url, BASIC, _opts(pki))
    paths = [path for path, _ in standin.state.requests]
    assert paths == [
        "/ufmRest/resources/systems",
        "/ufmRest/resources/ports",
        "/ufmRest/resources/links",
        "/ufmRest/app/unhealthy_ports",
    ]


def test_token_auth_uses_ufmrestv3(standin: Standin, pki: Pki) -> None:
    creds = UfmCredentials(token=TOKEN, origin="test")
    responses = fetch_ufm(standin.url, creds, _opts(pki))
    assert json.loads(responses.systems)
    for path, headers in standin.state.requests:
        assert path.startswith("/ufmRestV3/")
        assert headers["Authorization"] == f"Basic {TOKEN}"


def test_client_certificate_auth(pki: Pki, small_fabric: Fabric) -> None:
    state = StandinState(ufm_json_from_fabric(small_fabric), cert_auth=True)
    creds = UfmCredentials(client_cert=pki.client_cert, client_key=pki.client_key, origin="t")
    with serve(pki, state) as running:
        fetch_ufm(running.url, creds, _opts(pki))
        for _, headers in state.requests:
            assert "Authorization" not in headers
        with pytest.raises(AuthError):  # no certificate, no credentials: refused
            fetch_ufm(running.url, UfmCredentials("x", "y"), _opts(pki, retries=0))


def test_collect_ufm_reads_credentials_from_the_environment(standin: Standin, pki: Pki) -> None:
    env = {"UFM_TOKEN": TOKEN}
    warned: list[str] = []
    responses = collect_ufm(standin.url, None, _opts(pki), env=env, warn=warned.append)
    assert fabric_from_ufm(responses).switches and not warned
    assert all(path.startswith("/ufmRestV3/") for path, _ in standin.state.requests)
    with pytest.raises(AuthError, match="no UFM credentials"):
        collect_ufm(standin.url, None, _opts(pki), env={})


def test_url_forms_are_normalised(standin: Standin, pki: Pki) -> None:
    host = standin.url.removeprefix("https://")
    for url in (standin.url + "/", standin.url + "/ufmRest", host):
        assert fetch_ufm(url, BASIC, _opts(pki)).url == standin.url


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(AuthError) as err:
        fetch_ufm(f"https://{USER}:{PASSWORD}@127.0.0.1:1", BASIC)
    _assert_clean(str(err.value))


# --------------------------------------------------------------------------------------------
# Faults


def _fetch_error(
    standin: Standin, pki: Pki, fault: str | None, creds: UfmCredentials = BASIC, **opts: Any
) -> TopographError:
    standin.state.fault = fault
    with pytest.raises(TopographError) as err:
        fetch_ufm(standin.url, creds, _opts(pki, **opts), sleep=lambda _s: None)
    return err.value


@pytest.mark.parametrize(
    ("fault", "kind", "code", "text"),
    [
        ("401", AuthError, Exit.AUTH, "rejected the basic credentials from test (HTTP 401"),
        ("403", AuthError, Exit.AUTH, "may not read /ufmRest/resources/systems (HTTP 403)"),
        ("404", CollectError, Exit.COLLECT, "has no /ufmRest/resources/links (404): is this UFM"),
        ("500", CollectError, Exit.COLLECT, "HTTP 500 (after 3 attempts)"),
        ("invalid-json", ParseError, Exit.INPUT, "invalid JSON"),
        ("truncated", InputError, Exit.INPUT, "truncated response"),
        ("wrong-schema", ParseError, Exit.INPUT, "expected a JSON list, got a JSON object"),
    ],
)
def test_fault_is_one_clear_error(
    standin: Standin,
    pki: Pki,
    capsys: pytest.CaptureFixture[str],
    fault: str,
    kind: type[TopographError],
    code: Exit,
    text: str,
) -> None:
    err = _fetch_error(standin, pki, fault, retries=2)
    assert isinstance(err, kind)
    assert err.exit_code == code
    assert text in str(err)
    assert "\n" not in str(err)
    out = capsys.readouterr()
    _assert_clean(str(err) + out.out + out.err)


@pytest.mark.parametrize("fault", ["401", "403", "500"])
def test_token_never_appears_in_errors(standin: Standin, pki: Pki, fault: str) -> None:
    err = _fetch_error(standin, pki, fault, UfmCredentials(token=TOKEN, origin="env"), retries=0)
    _assert_clean(str(err))
    assert "/ufmRestV3/" in str(err)


def test_auth_errors_are_not_retried(standin: Standin, pki: Pki) -> None:
    _fetch_error(standin, pki, "401", retries=3)
    assert len(standin.state.requests) == 1


def test_500_then_success_is_retried_with_backoff(standin: Standin, pki: Pki) -> None:
    standin.state.fault = "500-then-ok"
    standin.state.failures = 2
    slept: list[float] = []
    opts = FetchOptions(ca_bundle=pki.ca, retries=3, backoff=0.25)
    responses = fetch_ufm(standin.url, BASIC, opts, sleep=slept.append)
    assert slept == [0.25, 0.5]
    assert fabric_from_ufm(responses).switches


def test_retries_are_bounded(standin: Standin, pki: Pki) -> None:
    standin.state.fault = "500"
    slept: list[float] = []
    with pytest.raises(CollectError, match="after 4 attempts"):
        fetch_ufm(standin.url, BASIC, _opts(pki, retries=3, backoff=1.0), sleep=slept.append)
    assert slept == [1.0, 2.0, 4.0]
    assert len(standin.state.requests) == 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_retried_then_one_line() -> None:
    slept: list[float] = []
    url = f"https://127.0.0.1:{_free_port()}"
    with pytest.raises(CollectError) as err:
        fetch_ufm(url, BASIC, FetchOptions(retries=2, backoff=0.1), sleep=slept.append)
    assert (
        str(err.value) == f"cannot connect to UFM at {url}: connection refused (after 3 attempts)"
    )
    assert err.value.exit_code == Exit.COLLECT
    assert slept == [0.1, 0.2]


def test_slow_server_times_out(standin: Standin, pki: Pki) -> None:
    standin.state.delay = 1.0
    err = _fetch_error(standin, pki, "slow", timeout=0.2, retries=0)
    assert isinstance(err, CollectError)
    assert "timed out after 0.2s" in str(err)


@pytest.mark.parametrize("fault", ["trickle", "trickle-head"])
def test_a_trickling_server_is_cut_off_at_the_deadline(
    standin: Standin, pki: Pki, fault: str
) -> None:
    """A byte every 0.3 s keeps a 5 s socket timeout from ever firing; the deadline does not
    care, and the cut is final (no retry may start after it)."""
    standin.state.delay = 0.3
    start = time.monotonic()
    err = _fetch_error(standin, pki, fault, timeout=5.0, deadline=1.0, retries=3)
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 1.8, elapsed
    assert isinstance(err, CollectError) and err.exit_code == Exit.COLLECT
    assert str(err) == (
        f"UFM at {standin.url}: no complete answer within the 1s deadline (--ufm-deadline), "
        "stopped at /ufmRest/resources/systems"
    )
    assert len(standin.state.requests) == 1


def test_the_deadline_leaves_no_time_for_a_backoff_it_cannot_afford(
    standin: Standin, pki: Pki
) -> None:
    slept: list[float] = []
    standin.state.fault = "500"
    opts = _opts(pki, retries=5, backoff=10.0, deadline=3.0)
    with pytest.raises(CollectError) as err:
        fetch_ufm(standin.url, BASIC, opts, sleep=slept.append)
    assert slept == []
    assert str(err.value).endswith(
        "failed with HTTP 500 (after 1 attempt; no time left for another within the 3s deadline)"
    )


@pytest.mark.parametrize(
    ("fault", "size"),
    [
        ("huge", "announces 3145728 bytes, over the 1 MiB limit"),
        ("huge-stream", "is larger than the 1 MiB limit"),
    ],
)
def test_a_body_over_the_cap_is_refused(standin: Standin, pki: Pki, fault: str, size: str) -> None:
    standin.state.size = 3 * MIB
    err = _fetch_error(standin, pki, fault, max_bytes=MIB, retries=3)
    assert isinstance(err, CollectError) and err.exit_code == Exit.COLLECT
    assert str(err) == (
        f"UFM at {standin.url}: /ufmRest/resources/systems {size} per response "
        "(--ufm-max-response-mib / ufm_max_response_mib)"
    )
    assert len(standin.state.requests) == 1  # a size is no reason to try again


def test_the_cap_is_exact(standin: Standin, pki: Pki) -> None:
    sizes = {key: len(json.dumps(v, indent=1).encode()) for key, v in standin.state.data.items()}
    largest = max(sizes.values())
    assert fetch_ufm(standin.url, BASIC, _opts(pki, max_bytes=largest)).ports
    biggest = max(sizes, key=lambda key: sizes[key])
    with pytest.raises(CollectError, match=f"{biggest}.* over the {largest - 1} bytes limit"):
        fetch_ufm(standin.url, BASIC, _opts(pki, max_bytes=largest - 1))


@pytest.mark.parametrize(
    ("option", "value", "flag"),
    [
        ("deadline", 0.0, "--ufm-deadline"),
        ("deadline", float("nan"), "--ufm-deadline"),
        ("timeout", -1.0, "--ufm-timeout"),
        ("timeout", float("inf"), "--ufm-timeout"),
        ("max_bytes", 0, "--ufm-max-response-mib"),
    ],
)
def test_limits_must_be_positive(option: str, value: float, flag: str) -> None:
    given: dict[str, Any] = {option: value}
    with pytest.raises(UsageError, match=flag):
        FetchOptions(**given)


def test_missing_fields_are_an_unexpected_schema(standin: Standin, pki: Pki) -> None:
    standin.state.fault = "missing-fields"
    responses = fetch_ufm(standin.url, BASIC, _opts(pki))
    with pytest.raises(ParseError, match=r"links\[0\]: missing field 'source_guid'"):
        fabric_from_ufm(responses)


@pytest.mark.parametrize("bundle", [None, "other"])
def test_wrong_certificate_is_refused(standin: Standin, pki: Pki, bundle: str | None) -> None:
    ca = pki.other_ca if bundle else None
    standin.state.fault = None
    with pytest.raises(CollectError) as err:
        fetch_ufm(standin.url, BASIC, FetchOptions(ca_bundle=ca, retries=3), sleep=lambda _: None)
    message = str(err.value)
    assert "TLS certificate verification failed" in message
    assert "--ufm-ca-bundle" in message
    assert "after" not in message  # certificate errors are not retried
    assert err.value.exit_code == Exit.COLLECT
    _assert_clean(message)


def test_insecure_skips_verification_and_warns(standin: Standin) -> None:
    with pytest.warns(UfmInsecureWarning, match="verification .* is OFF"):
        fetch_ufm(standin.url, BASIC, FetchOptions(insecure=True))
    messages: list[str] = []
    fetch_ufm(standin.url, BASIC, FetchOptions(insecure=True), warn=messages.append)
    assert len(messages) == 1 and "--ufm-insecure" in messages[0]


def test_plain_http_works_but_warns(pki: Pki, small_fabric: Fabric) -> None:
    messages: list[str] = []
    with serve(pki, _state(small_fabric), tls=False) as running:
        responses = fetch_ufm(running.url, BASIC, warn=messages.append)
    assert responses.url.startswith("http://") and fabric_from_ufm(responses).cas
    assert len(messages) == 1 and "plain http" in messages[0]
    _assert_clean(messages[0])


def test_bad_ca_bundle_path_is_an_input_error(standin: Standin, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot load UFM CA bundle"):
        fetch_ufm(standin.url, BASIC, FetchOptions(ca_bundle=tmp_path / "nope.pem"))


# --------------------------------------------------------------------------------------------
# Credentials


def _private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_yaml_values_stay_strings(tmp_path: Path) -> None:
    path = _private(tmp_path / "ufm.yaml", "username: 007\npassword: 0123\n")
    assert (load_credentials(path, {}).username, load_credentials(path, {}).password) == (
        "007",
        "0123",
    )


def test_yaml_credentials_file(tmp_path: Path) -> None:
    path = _private(tmp_path / "ufm.yaml", f"username: {USER}\npassword: '{PASSWORD}'\n")
    creds = load_credentials(path, {})
    assert (creds.kind, creds.username, creds.password, creds.prefix) == (
        "basic",
        USER,
        PASSWORD,
        "/ufmRest",
    )
    assert PASSWORD not in repr(creds)


def test_key_value_credentials_file(tmp_path: Path) -> None:
    path = _private(tmp_path / "ufm.cred", f"# UFM\ntoken = {TOKEN}\n")
    creds = load_credentials(path, {"UFM_USERNAME": "ignored"})
    assert (creds.kind, creds.token, creds.prefix) == ("token", TOKEN, "/ufmRestV3")
    assert TOKEN not in repr(creds)


def test_certificate_credentials_resolve_relative_to_the_file(tmp_path: Path, pki: Pki) -> None:
    (tmp_path / "c.pem").write_bytes(pki.client_cert.read_bytes())
    _private(tmp_path / "c.key", pki.client_key.read_text())
    path = _private(tmp_path / "ufm.yaml", "client_cert: c.pem\nclient_key: c.key\n")
    creds = load_credentials(path, {})
    assert creds.kind == "cert" and creds.client_cert == tmp_path / "c.pem"
    assert creds.headers() == {}


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_group_or_world_readable_file_is_refused(tmp_path: Path, mode: int) -> None:
    path = _private(tmp_path / "ufm.yaml", f"username: {USER}\npassword: {PASSWORD}\n", mode)
    with pytest.raises(AuthError) as err:
        load_credentials(path, {})
    assert f"mode {mode:04o}" in str(err.value) and "chmod 600" in str(err.value)
    assert err.value.exit_code == Exit.AUTH
    _assert_clean(str(err.value))


def test_readable_client_key_is_refused(tmp_path: Path, pki: Pki) -> None:
    key = _private(tmp_path / "c.key", pki.client_key.read_text(), 0o644)
    env = {"UFM_CLIENT_CERT": str(pki.client_cert), "UFM_CLIENT_KEY": str(key)}
    with pytest.raises(AuthError, match=r"UFM client key .* readable by group or others"):
        load_credentials(None, env)


def test_environment_credentials() -> None:
    assert load_credentials(None, {"UFM_USERNAME": USER, "UFM_PASSWORD": PASSWORD}).kind == "basic"
    assert load_credentials(None, {"UFM_TOKEN": TOKEN}).token == TOKEN


@pytest.mark.parametrize(
    ("env", "text"),
    [
        ({}, "no UFM credentials"),
        ({"UFM_USERNAME": USER}, "username and password both needed"),
        ({"UFM_TOKEN": TOKEN, "UFM_PASSWORD": PASSWORD}, "give exactly one method"),
        ({"UFM_CLIENT_CERT": "/nonexistent.pem"}, "not found"),
    ],
)
def test_bad_environment_credentials(env: dict[str, str], text: str) -> None:
    with pytest.raises(AuthError, match=text) as err:
        load_credentials(None, env)
    _assert_clean(str(err.value))


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (f"username: {USER}\npasswd: {PASSWORD}\n", "unknown key 'passwd'"),
        (f"password: [{PASSWORD}\n", r"invalid YAML \(line"),
        (f"{PASSWORD}\n", "no UFM credentials|expected key=value|exactly one"),
        (f"- {PASSWORD}\n", "expected a mapping"),
    ],
)
def test_bad_credentials_file_never_echoes_the_secret(
    tmp_path: Path, content: str, text: str
) -> None:
    path = _private(tmp_path / "ufm.yaml", content)
    with pytest.raises(AuthError, match=text) as err:
        load_credentials(path, {})
    _assert_clean(str(err.value))


@pytest.mark.parametrize("around", ["\r", "\n", "\r\n", " \t"])
def test_whitespace_around_a_secret_is_stripped(
    standin: Standin, pki: Pki, tmp_path: Path, around: str
) -> None:
    """``export UFM_TOKEN=$(cat token.txt)`` of a CRLF file ends the token in CR."""
    env = {"UFM_USERNAME": f"{around}{USER}{around}", "UFM_PASSWORD": f"{PASSWORD}{around}"}
    assert fetch_ufm(standin.url, load_credentials(None, env), _opts(pki)).ports
    creds = load_credentials(None, {"UFM_TOKEN": f"{around}{TOKEN}{around}"})
    assert creds.token == TOKEN
    text = f'token: "{around!r}{TOKEN}{around!r}"\n'.replace("'", "")  # YAML escapes
    assert load_credentials(_private(tmp_path / "t.yaml", text), {}).token == TOKEN


CONTROL = {"\r": "CR", "\n": "LF", "\0": "NUL", "\x1b": "ESC", "\x7f": "DEL", "\x85": "U+0085"}
REFUSED = [
    (field, char, where)
    for field in ("password", "token")
    for char in CONTROL
    for where in ("inside", "around")
    if where == "inside" or not char.isspace()  # surrounding whitespace is stripped instead
]


@pytest.mark.parametrize(("field", "char", "where"), REFUSED)
def test_a_control_character_in_a_secret_is_refused_without_the_value(
    tmp_path: Path, field: str, char: str, where: str
) -> None:
    secret = PASSWORD if field == "password" else TOKEN
    half = len(secret) // 2
    bad = secret[:half] + char + secret[half:] if where == "inside" else char + secret + char
    values: dict[str, Any] = {"username": USER, "password": bad}
    if field == "token":
        values = {"token": bad}
    # a key=value file keeps the raw character (YAML refuses it unescaped); a line break
    # inside splits the line, which is refused as a line that is not key=value
    path = _private(tmp_path / "ufm.cred", "".join(f"{k}={v}\n" for k, v in values.items()))
    for build in (partial(load_credentials, path, {}), partial(UfmCredentials, **values)):
        with pytest.raises(AuthError) as err:
            build()
        message = str(err.value)
        assert err.value.exit_code == Exit.AUTH and "\n" not in message
        assert secret[:half] not in message and secret[half:] not in message
        if "key=value" not in message:
            assert f"the {field} contains a control character ({CONTROL[char]})" in message


def test_usernames_and_tokens_http_cannot_carry_are_refused() -> None:
    with pytest.raises(AuthError, match="username contains ':'"):
        UfmCredentials("ad:min", PASSWORD)
    with pytest.raises(AuthError, match="token contains non-ASCII"):
        UfmCredentials(token="tök")


MARK = "Zq9#"  # in the middle of every fuzzed secret: any echo of a value shows it


@settings(max_examples=2000, deadline=None)
@given(user=st.text(max_size=8), secret=st.tuples(st.text(max_size=8), st.text(max_size=8)))
def test_any_credentials_give_a_sendable_header_or_one_clean_auth_error(
    user: str, secret: tuple[str, str]
) -> None:
    """The class behind the CR in UFM_TOKEN: whatever the environment holds, either the
    credentials are refused with one line that shows no secret, or every header they make is
    one http.client accepts (it raises ValueError with the header, secret and all, otherwise)."""
    value = secret[0] + MARK + secret[1]
    for values in ({"UFM_USERNAME": user, "UFM_PASSWORD": value}, {"UFM_TOKEN": value}):
        try:
            creds = load_credentials(None, values)
        except AuthError as err:
            assert "\n" not in str(err) and "\r" not in str(err) and MARK not in str(err)
            continue
        conn = http.client.HTTPConnection("127.0.0.1")
        conn.putrequest("GET", "/ufmRest/resources/systems")
        for name, value in creds.headers().items():
            conn.putheader(name, value)  # raises ValueError/UnicodeEncodeError if unsendable


def test_missing_credentials_file(tmp_path: Path) -> None:
    with pytest.raises(AuthError, match="cannot read UFM credentials file"):
        load_credentials(tmp_path / "absent.yaml", {})


# --------------------------------------------------------------------------------------------
# Snapshots


def test_a_stored_answer_that_is_not_utf8_is_one_input_error(
    standin: Standin, pki: Pki, tmp_path: Path
) -> None:
    """Stored answers are read as bytes (msgspec decodes them directly) but still checked:
    a byte that is no UTF-8 anywhere in the file, even in a field never decoded, refuses it."""
    folder = store_responses(fetch_ufm(standin.url, BASIC, _opts(pki)), tmp_path / "snap")
    ports = folder / "ports.json"
    ports.write_bytes(ports.read_bytes().replace(b'"dname": "', b'"dname": "\xff', 1))
    with pytest.raises(InputError, match=r"ports.json: not UTF-8 text"):
        load_responses(tmp_path / "snap")
    ports.write_bytes(ports.read_bytes().replace(b"\xff", "\u00e9".encode()))
    assert fabric_from_ufm(load_responses(tmp_path / "snap")).links


def test_snapshot_round_trip(standin: Standin, pki: Pki, tmp_path: Path) -> None:
    responses = fetch_ufm(standin.url, BASIC, _opts(pki))
    folder = store_responses(responses, tmp_path / "snap")
    assert sorted(p.name for p in folder.iterdir()) == [
        "links.json",
        "ports.json",
        "systems.json",
        "unhealthy_ports.json",
        "url.txt",
    ]
    assert has_snapshot(tmp_path / "snap")
    assert sorted(snapshot_files(responses)) == [f"ufm/{p.name}" for p in sorted(folder.iterdir())]
    loaded = load_responses(tmp_path / "snap")
    assert isinstance(loaded.ports, bytes)  # read as bytes: msgspec decodes them directly
    assert snapshot_files(loaded) == snapshot_files(responses)  # byte for byte as fetched
    assert _links(fabric_from_ufm(loaded)) == _links(fabric_from_ufm(responses))
    for path in folder.iterdir():
        _assert_clean(path.read_text())


def test_incomplete_snapshot_is_an_input_error(standin: Standin, pki: Pki, tmp_path: Path) -> None:
    folder = store_responses(fetch_ufm(standin.url, BASIC, _opts(pki)), tmp_path)
    os.unlink(folder / "ports.json")
    with pytest.raises(InputError, match=r"ports\.json missing"):
        load_responses(tmp_path)
    assert not has_snapshot(tmp_path / "elsewhere")
