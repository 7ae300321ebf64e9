"""UFM JSON → Fabric: real UFM answers (NVIDIA Selene, from the UFM SDK), rates taken from the
ports, and every wrong shape of an answer as one error line naming the endpoint and the field.

The byte-for-byte agreement with ibnetdiscover for the same fabric is pinned in test_ufm.py and
test_ufm_cli.py; this file pins what the real answers settle and what bad answers must do.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import real_fixture
from tests.support.ufm_standin import Pki, StandinState, make_pki, serve, ufm_json_from_fabric
from topograph_slurm.analysis.fabric.naming import NamingPolicy, host_of, name_switches
from topograph_slurm.cli.main import main
from topograph_slurm.collect import collect
from topograph_slurm.collect.plan import CollectPlan
from topograph_slurm.errors import Exit, ParseError
from topograph_slurm.model.fabric import Fabric, Link
from topograph_slurm.sources import sim
from topograph_slurm.sources.ibnetdiscover import fork as translate_fork
from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover
from topograph_slurm.sources.ufm import (
    ENDPOINTS,
    UfmResponses,
    cables,
    fabric_from_ufm,
    schema,
    snapshot_files,
)
from topograph_slurm.sources.ufm.columns import decode, port_ids
from topograph_slurm.sources.ufm.responses import load_list

SELENE = {
    "systems": "ufm/selene-ufm-rest-systems-switch-and-host-hdr.json",
    "ports": "ufm/selene-ufm-rest-ports-switch-and-host-hdr.json",
    "links": "ufm/selene-ufm-rest-links-1-switch-switch-hdr.json",
}
LEAF, SPINE, LEAF2 = "1c34da0300728606", "1c34da0300728a06", "0c42a103005de2f0"
HOST_HCA, PEER_HCA = "0c42a10300280000", "0c42a103001b8256"
USER, PASSWORD = "ufmadmin", "pa55-w0rd-XYZZY"


def _selene() -> dict[str, Any]:
    data: dict[str, Any] = {
        key: json.loads(real_fixture(rel).read_text(encoding="utf-8"))
        for key, rel in SELENE.items()
    }
    return data | {"unhealthy_ports": []}


def _responses(data: dict[str, Any]) -> UfmResponses:
    return UfmResponses(**{key: json.dumps(data[key]) for key in ENDPOINTS}, url="selene")


# --------------------------------------------------------------------------------------------
# Real answers


def test_selene_answers_give_the_devices_and_cables_they_name() -> None:
    """Counted by hand in the three files: 2 systems (the MQM8700 leaf SLG01-02 and the host
    luna-0218), 2 ports (leaf port 1 → luna-0001 mlx5_10 port 1; luna-0218 mlx5_4 port 1 →
    SLG02-07 port 6) and 1 link (SLG01-02 port 37 → SSPINE1-13 port 2). The samples were taken
    apart from each other, so the link's ends and both ports' peers have no port record: each
    such device is made from the node description UFM gives for it, with a note."""
    fabric = fabric_from_ufm(_responses(_selene()))
    assert sorted(fabric.switches) == sorted([LEAF, SPINE, LEAF2])
    assert sorted(fabric.cas) == sorted([HOST_HCA, PEER_HCA])
    assert sorted(fabric.links) == sorted(
        [
            Link.between(LEAF, 1, PEER_HCA, 1, "4x", "HDR"),
            Link.between(HOST_HCA, 1, LEAF2, 6, "4x", "HDR"),
            Link.between(LEAF, 37, SPINE, 2, "4x", "???"),  # neither port is in the sample
        ]
    )
    assert sorted(n.guid for n in fabric.notes if n.kind == "no-block") == sorted(
        [SPINE, LEAF2, PEER_HCA]
    )
    assert fabric.switches[LEAF].lid == 2  # the port's LID; the others have no port record


def test_selene_names_come_out_as_ibnetdiscover_would_give_them() -> None:
    """ibnetdiscover shows the leaf as ``MF0;SLG01-02:MQM8700/U1`` and the HCA by its node
    description; UFM has ``system_name`` SLG01-02 + ``model`` MQM8700 (its ``name`` is the
    GUID) and the port's ``node_description`` ``luna-0218 mlx5_4`` (the host system is named
    luna-0218 too)."""
    fabric = fabric_from_ufm(_responses(_selene()))
    assert fabric.switches[LEAF].description == "MF0;SLG01-02:MQM8700/U1"
    assert name_switches(fabric) == {LEAF: "SLG01-02", SPINE: "SSPINE1-13", LEAF2: "SLG02-07"}
    policy = NamingPolicy()
    hosts = {guid: host_of(ca.description, policy)[0] for guid, ca in fabric.cas.items()}
    assert hosts == {HOST_HCA: "luna-0218", PEER_HCA: "luna-0001"}


def test_a_link_takes_its_rate_from_the_ports_at_its_ends() -> None:
    """UFM's links carry a width but no speed: the real link record, with port records at its
    two ends made from the real switch port record, comes out at the ports' 4xHDR."""
    data = _selene()
    (link,) = data["links"]
    switch_port = data["ports"][0]
    data["ports"] = [
        switch_port | {"guid": link["source_guid"], "number": 37, "peer": "N/A"},
        switch_port | {"guid": link["destination_guid"], "number": 2, "peer": "N/A"},
    ]
    (cable,) = fabric_from_ufm(_responses(data)).links
    assert (cable.width, cable.speed) == ("4x", "HDR")


@pytest.mark.parametrize(
    ("end", "rate"),
    [
        ({"active_speed": "EDR"}, ("4x", "EDR")),
        ({"active_width": "1x", "active_speed": "NDR"}, ("1x", "NDR")),  # 100 < 200 Gb/s
        ({"active_width": "N/A"}, ("4x", "HDR")),  # no width at the port: the link's
    ],
)
def test_the_slower_end_wins_and_a_mismatch_is_noted(
    end: dict[str, str], rate: tuple[str, str]
) -> None:
    data = _selene()
    (link,) = data["links"]
    switch_port = data["ports"][0] | {"peer": "N/A"}
    data["ports"] = [
        switch_port | {"guid": link["source_guid"], "number": 37},
        switch_port | {"guid": link["destination_guid"], "number": 2} | end,
    ]
    fabric = fabric_from_ufm(_responses(data))
    (cable,) = fabric.links
    assert (cable.width, cable.speed) == rate
    mismatch = [n.message for n in fabric.notes if n.kind == "link-mismatch"]
    assert bool(mismatch) == (rate != ("4x", "HDR"))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main, ["--config", os.devnull, *args], env=env or {}, catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def test_generate_ufm_on_the_selene_answers_gives_a_topology(pki: Pki) -> None:
    """The real answers served by the loopback stand-in, through the real client and CLI."""
    state = StandinState(_selene(), username=USER, password=PASSWORD)
    env = {"UFM_USERNAME": USER, "UFM_PASSWORD": PASSWORD, "UFM_TOKEN": ""}
    with serve(pki, state) as running:
        args = ["generate", "--ufm", running.url, "--ufm-ca-bundle", str(pki.ca)]
        code, out, err = _run([*args, "--format", "tree"], env)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert lines == ["SwitchName=SLG01-02 Nodes=luna-0001", "SwitchName=SLG02-07 Nodes=luna-0218"]


# --------------------------------------------------------------------------------------------
# Bad shapes: one ParseError (exit 3) naming the endpoint, the entry and the field


@pytest.fixture(scope="module")
def small() -> dict[str, Any]:
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=8,rails=2,su=4"))
    return ufm_json_from_fabric(parse_ibnetdiscover(text, "sim"))


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


#: (endpoint, field of entry 0, raw JSON value, words the message must hold)
BAD_FIELDS = [
    ("ports", "capabilities", _deep(1000), "JSON nested deeper than 32 levels"),
    ("links", "cable_info", _deep(100_000), "JSON nested deeper than 32 levels"),
    ("ports", "node_description", _deep(1000), "expected string | null, got list"),
    ("links", "source_guid", '["0x1"]', "expected string, got list"),
    ("ports", "guid", "{}", "got object"),
    ("ports", "number", '"one"', "bad port number 'one'"),
    ("ports", "number", "1" + "0" * 40, "expected integer <= 255"),
    ("ports", "number", "256", "<= 255"),
    ("ports", "number", "1.5", "got number"),
    ("ports", "lid", str(2**70), "expected integer <= 65535"),
    ("ports", "lid", "-1", "expected integer >= 0"),
    ("links", "source_port", '"999"', "bad port number '999'"),
    ("links", "source_port", "true", "got boolean"),
    ("links", "destination_guid", "null", "got null"),
    ("systems", "type", "null", "got null"),
    ("systems", "system_name", "7", "got integer"),
    ("unhealthy_ports", "Condition", '[["HIGH_BER"]]', "expected string, got list"),
    ("ports", "active_speed", "1e400", "out of range"),
    ("ports", "guid", '"not-hex"', "bad GUID 'not-hex'"),
    ("ports", "guid", '"00_02c9"', "bad GUID '00_02c9'"),
    ("ports", "guid", '"\u0663"', "bad GUID '\u0663'"),
    ("ports", "number", '"\u00b2"', "bad port number '\u00b2'"),
    ("links", "source_port", '"\u0664"', "bad port number '\u0664'"),
    ("links", "source_port", '"' + "9" * 5000 + '"', "bad port number '999"),
]


def _with_field(data: dict[str, Any], endpoint: str, name: str, raw: str) -> UfmResponses:
    """The answers with entry 0's *name* of *endpoint* replaced by the raw JSON *raw*."""
    texts = {key: json.dumps(data[key]) for key in ENDPOINTS}
    if not data[endpoint]:
        data = data | {endpoint: [{"UnhealthyGUID": "0x1", "UnhealthyPortNumber": 1}]}
    entries = [json.dumps(e) for e in data[endpoint]]
    first = {k: v for k, v in data[endpoint][0].items() if k != name}
    entries[0] = json.dumps(first)[:-1] + f', "{name}": {raw}}}'
    texts[endpoint] = "[" + ", ".join(entries) + "]"
    return UfmResponses(**texts, url="ufm")


def _id(case: tuple[str, str, str, str]) -> str:
    endpoint, name, raw, _ = case
    return f"{endpoint}.{name}={raw[:12]}{'...' if len(raw) > 12 else ''}"


@pytest.mark.parametrize(("endpoint", "name", "raw", "words"), BAD_FIELDS, ids=map(_id, BAD_FIELDS))
def test_a_wrong_field_is_one_error_naming_endpoint_and_field(
    small: dict[str, Any], endpoint: str, name: str, raw: str, words: str
) -> None:
    with pytest.raises(ParseError) as err:
        fabric_from_ufm(_with_field(small, endpoint, name, raw))
    message = str(err.value)
    assert message.startswith(f"ufm/{endpoint}[0]: ") and name in message, message
    assert words in message and "\n" not in message and len(message) < 300, message
    assert err.value.exit_code == Exit.INPUT


@pytest.mark.parametrize(
    ("endpoint", "text", "words"),
    [
        ("ports", "[null]", "ufm/ports[0]: entry is a JSON null, not an object"),
        ("links", "[[]]", "ufm/links[0]: entry is a JSON list, not an object"),
        ("systems", '{"a": 1}', "ufm/systems: expected a JSON list, got a JSON object"),
        ("systems", '"text"', "ufm/systems: expected a JSON list, got a JSON string"),
        ("ports", _deep(1000), "ufm/ports[0]: entry is a JSON list, not an object"),
        ("ports", f'[{{"x": {_deep(1000)}}}]', "ufm/ports[0]: field 'x': JSON nested deeper"),
        ("links", '[{"source_guid": "1', "ufm/links:1: invalid JSON (truncated?)"),
        ("links", '[{"x": 1}]', "ufm/links[0]: missing field 'source_guid'"),
        ("systems", '[{"type": "switch"}]', "ufm/systems[0]: missing field 'system_guid'"),
        ("links", "[]\n [2]", "ufm/links:2: invalid JSON: trailing characters at column"),
    ],
)
def test_a_wrong_answer_is_one_error(
    small: dict[str, Any], endpoint: str, text: str, words: str
) -> None:
    """What the answer as a whole can get wrong; the line and column are the text's."""
    texts = {key: json.dumps(small[key]) for key in ENDPOINTS} | {endpoint: text}
    with pytest.raises(ParseError) as err:
        fabric_from_ufm(UfmResponses(**texts, url="ufm"))
    assert str(err.value).startswith(words), str(err.value)
    assert "\n" not in str(err.value)


def test_the_client_check_survives_deep_nesting() -> None:
    """``load_list`` is what the client runs on every fetched body."""
    with pytest.raises(ParseError, match=r"^UFM x\[0\]: JSON nested deeper than 32 levels"):
        load_list(_deep(5000), "UFM x")
    assert len(load_list('[{"a": [1, {"b": 2}]}, 3]', "UFM x")) == 2


@pytest.fixture
def snapshot(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "snap"


@pytest.mark.parametrize(
    ("endpoint", "name", "raw", "words"), BAD_FIELDS[:3], ids=map(_id, BAD_FIELDS[:3])
)
def test_generate_on_a_bad_snapshot_exits_3_with_one_line(
    small: dict[str, Any], snapshot: Path, endpoint: str, name: str, raw: str, words: str
) -> None:
    files = snapshot_files(_with_field(small, endpoint, name, raw))
    collect(CollectPlan(nodes=[]), snapshot, extra_files=files, extra_manifest={})
    code, out, err = _run(["generate", "--snapshot", str(snapshot)])
    assert code == Exit.INPUT, err
    (line,) = err.splitlines()
    assert line.startswith("topograph-slurm: error: ") and words in line and name in line
    assert out == ""


# --------------------------------------------------------------------------------------------
# Any value anywhere: a Fabric or one ParseError, never another exception

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
FIELDS = {
    "systems": ["system_guid", "guid", "type", "system_name", "model", "description"],
    "ports": [
        "guid",
        "number",
        "name",
        "description",
        "node_description",
        "systemID",
        "lid",
        "active_speed",
        "active_width",
        "peer",
        "peer_node_description",
        "peer_port_dname",
    ],
    "links": [
        "source_guid",
        "source_port",
        "destination_guid",
        "destination_port",
        "width",
        "source_port_node_description",
        "destination_port_dname",
    ],
}


@settings(
    max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    endpoint=st.sampled_from(sorted(FIELDS)),
    data=st.data(),
    value=JSON,
)
def test_any_value_in_any_field_is_a_fabric_or_one_parse_error(
    small: dict[str, Any], endpoint: str, data: st.DataObject, value: object
) -> None:
    name = data.draw(st.sampled_from(FIELDS[endpoint]))
    index = data.draw(st.integers(0, len(small[endpoint]) - 1))
    changed = small | {endpoint: list(small[endpoint])}
    changed[endpoint][index] = changed[endpoint][index] | {name: value}
    texts = {key: json.dumps(changed[key]) for key in ENDPOINTS}
    try:
        fabric = fabric_from_ufm(UfmResponses(**texts, url="ufm"))
    except ParseError as err:
        assert "\n" not in str(err) and str(err).startswith(f"ufm/{endpoint}")
        return
    assert isinstance(fabric, Fabric) and fabric.cas


# --------------------------------------------------------------------------------------------
# The port rates and the links read by a forked child


def _fabric_state(fabric: Fabric) -> tuple[object, ...]:
    return fabric.switches, fabric.cas, list(fabric.links), fabric.notes


@pytest.mark.skipif(not translate_fork.spare_cpu(), reason="needs a second CPU to fork onto")
def test_cables_read_by_a_forked_child_give_the_same_fabric(
    small: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large answers have their links decoded and matched to the ports by a forked child
    while the ports' devices are read; the Fabric is the same (a degraded port and the
    mismatch note included), and every cable end is still the very string that keys its
    device."""
    responses = _with_field(small, "ports", "active_width", '"1x"')
    here = fabric_from_ufm(responses)
    children: list[int | None] = []
    start = translate_fork.in_background

    def spy(compute: Any, *feeds: Any) -> Any:
        pending = start(compute, *feeds)
        children.append(pending.pid)
        return pending

    monkeypatch.setattr(cables, "_FORK_AT", 0)
    monkeypatch.setattr(translate_fork, "in_background", spy)
    forked = fabric_from_ufm(responses)
    assert children and children[0] is not None, "the links were not read by a child"
    assert _fabric_state(forked) == _fabric_state(here)
    assert [note.kind for note in forked.notes] == ["link-mismatch"]
    devices = {guid: guid for guid in [*forked.switches, *forked.cas]}
    assert all(end is devices[end] for end in [*forked.links.a, *forked.links.b])


def test_a_bad_links_answer_read_in_the_child_is_the_same_error_after_the_ports(
    small: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child fails, the parent reads the links itself and raises their ParseError; a bad
    ports answer is still reported first, as without the fork."""
    monkeypatch.setattr(cables, "_FORK_AT", 0)
    bad_links = _with_field(small, "links", "source_port", '"999"')
    with pytest.raises(ParseError, match=r"ufm/links\[0\]: field 'source_port': bad port"):
        fabric_from_ufm(bad_links)
    with pytest.raises(ParseError, match=r"ufm/ports\[0\]: entry is a JSON null"):
        fabric_from_ufm(dataclasses.replace(bad_links, ports="[null]"))
    bad_rate = _with_field(small, "ports", "active_speed", "1e400")
    with pytest.raises(ParseError, match=r"ufm/ports\[0\]: field 'active_speed'.*out of range"):
        fabric_from_ufm(bad_rate)


def _cables(ports: str | bytes, links: str | bytes) -> tuple[cables.PortIds, cables.Cables]:
    """The ports' identities and the cables, as the parent and the child work them out."""
    records = decode(ports, "ufm", "ports", schema.Port)
    ids = cables.PortIds(*port_ids(records, ports, "ufm", {}))
    return ids, cables.read_cables(links, ports, "ufm", lambda: ids)


def test_cables_travel_pickled_unchanged(small: dict[str, Any]) -> None:
    """What crosses the fork (the ports' identities there, the cable end rows, widths and
    linked flags back) arrives as it was computed, as a few byte strings rather than a list
    per cable; an empty links answer too."""
    ports, links = json.dumps(small["ports"]), json.dumps(small["links"])
    ids, read = _cables(ports, links)
    assert pickle.loads(pickle.dumps(ids)) == ids and len(ids.guids) == len(small["ports"])
    data = pickle.dumps(read)
    assert pickle.loads(data) == read and len(read.a) == len(small["links"]) > 10
    assert read.linked.count(1) == len(read.linked) == len(small["ports"])
    empty = _cables(ports, "[]")[1]
    per_cable = (len(data) - len(pickle.dumps(empty))) / len(read.a)
    assert per_cable < 16, "more than 4 bytes per column and cable"
    empty = pickle.loads(pickle.dumps(empty))
    assert (len(empty.a), empty.linked.count(0)) == (0, len(read.linked))


def test_cables_are_rated_by_the_slower_of_their_ports(small: dict[str, Any]) -> None:
    """A cable runs at the slower rate of its two ports: a 1x port makes its cable 1x and is
    counted as a mismatch; every rate is one shared tuple."""
    responses = _with_field(small, "ports", "active_width", '"1x"')
    ids, found = _cables(responses.ports, responses.links)
    interned: dict[str, str] = {}
    links, mismatches = found.links(ids.guids, ids.numbers, interned.setdefault), found.mismatches
    assert mismatches.count == 1 and mismatches.first.endswith("[1] 1xNDR vs 4xNDR")
    assert sorted(set(zip(links.width, links.speed, strict=True))) == [("1x", "NDR"), ("4x", "NDR")]
    rates = found.rates.all()
    assert len(set(map(id, rates))) == len(set(rates)) == 2


def test_a_port_listed_twice_counts_once_and_is_linked(small: dict[str, Any]) -> None:
    """A port record repeated in the ports answer is one port: linked, no cable taken from
    the ports, the same Fabric as without the repeat."""
    once = fabric_from_ufm(_responses(small))
    twice = fabric_from_ufm(_responses(small | {"ports": [*small["ports"], small["ports"][0]]}))
    assert _fabric_state(twice) == _fabric_state(once)
    assert "ports-only-links" not in [note.kind for note in twice.notes]
    unlinked = small | {"links": small["links"][1:], "ports": [*small["ports"], small["ports"][0]]}
    notes = [note.message for note in fabric_from_ufm(_responses(unlinked)).notes]
    assert any(message.startswith("1 cable(s) appear in UFM ports") for message in notes)


def test_a_switch_takes_the_first_lid_its_ports_give(small: dict[str, Any]) -> None:
    """A switch's LID is its lowest port's; when that port gives none (0, ``N/A``), the
    next port that gives one, in port order; none at all is no LID."""
    switch = sorted(fabric_from_ufm(_responses(small)).switches)[0]
    ports = [dict(port) for port in small["ports"]]
    own = sorted((p["number"], i) for i, p in enumerate(ports) if p["guid"] == switch)
    (_, lowest), (_, second) = own[0], own[1]
    ports[lowest]["lid"], ports[second]["lid"] = 0, 4321
    assert fabric_from_ufm(_responses(small | {"ports": ports})).switches[switch].lid == 4321
    for _, row in own:
        ports[row]["lid"] = "N/A"
    assert fabric_from_ufm(_responses(small | {"ports": ports})).switches[switch].lid is None


def test_isolated_devices_are_noted_whether_or_not_every_port_is_linked(
    small: dict[str, Any],
) -> None:
    """A switch system that lists no port is an isolated switch, also when every port is a
    link end (the fast case); a CA port that no link and no port's peer names makes its CA
    isolated too."""
    lonely = "0002c9ffffffff01"
    system = {"system_guid": lonely, "type": "switch", "system_name": "spare", "model": "QM9700"}
    data = small | {"systems": [*small["systems"], system]}
    notes = fabric_from_ufm(_responses(data)).notes
    assert [note.guid for note in notes if note.kind == "isolated"] == [lonely]
    ca_port = next(p for p in small["ports"] if p["description"] == "Computer IB Port")
    links = [
        link
        for link in small["links"]
        if ca_port["guid"] not in (link["source_guid"], link["destination_guid"])
    ]
    end = f"{ca_port['guid']}_{ca_port['number']}"
    ports = [p | {"peer": "N/A"} if end in (p["peer"], p["name"]) else p for p in small["ports"]]
    notes = fabric_from_ufm(_responses(data | {"links": links, "ports": ports})).notes
    assert sorted(n.guid for n in notes if n.kind == "isolated") == sorted(
        [lonely, ca_port["guid"]]
    )


def test_a_switch_systems_bad_guid_is_an_error_naming_the_port_that_gives_it(
    small: dict[str, Any],
) -> None:
    """A port's system is read where it names a switch's system (its lowest port): a bad
    GUID there is one error naming that port record and the field."""
    switch = sorted(fabric_from_ufm(_responses(small)).switches)[0]
    ports = [dict(port) for port in small["ports"]]
    _, lowest = min((p["number"], i) for i, p in enumerate(ports) if p["guid"] == switch)
    ports[lowest]["systemID"] = "not-hex"
    with pytest.raises(ParseError) as err:
        fabric_from_ufm(_responses(small | {"ports": ports}))
    assert str(err.value) == f"selene/ports[{lowest}]: field 'systemID': bad GUID 'not-hex'"
