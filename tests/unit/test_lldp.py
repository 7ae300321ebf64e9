"""LLDP from every node as the leaf layer of an Ethernet/RoCE fabric: json0 parsed (a made
input transcribed from a real capture, checked against it), the real NetQ graph's host cabling
heard as each host's LLDP would hear it (the same leaves, and the tiers above said unknown),
a snapshot with LLDP read by `generate`, and `collect --lldp` storing the output."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO, real_fixture
from tests.support.lldp import Heard, json0
from tests.support.snapshots import write_node_outputs
from tests.unit.test_collect import FakeCluster, _exe
from tests.unit.test_collect import fake as fake
from tests.unit.test_netq import GRAPH, LEAVES
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.cli.collect import collect as collect_command
from topograph_slurm.cli.main import main
from topograph_slurm.errors import ParseError
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.sources.lldp import KEY_LLDP, HostLink, fabric_from_lldp, parse_lldp

MADE = REPO / "tests" / "fixtures" / "made" / "lldp" / "host-net1-sn5600-cumulus.json0"
REAL = "lldp/lldpcli-show-neighbors-host-to-sn5600-cumulus.txt"


def test_the_made_json0_says_what_the_real_capture_says() -> None:
    text = real_fixture(REAL).read_text()
    interface = re.search(r"^Interface:\s+(\S+),", text, re.MULTILINE)
    sysname = re.search(r"SysName:\s+(\S+)", text)
    port = re.search(r"PortID:\s+ifname (\S+)", text)
    assert interface and sysname and port
    expected = HostLink("gpu1", interface[1], sysname[1], port[1])
    assert parse_lldp(MADE.read_text(), "gpu1") == [expected]
    assert expected == HostLink("gpu1", "net1", "cumulus", "swp4s1")


def _heard_from_netq() -> dict[str, str]:
    """Each host's json0 as its LLDP would hear the real NetQ graph's cabling: per host NIC,
    the switch's name and its port."""
    (graph,) = json.loads(real_fixture(GRAPH).read_text())
    names = {d["id"]: d for tier in graph["nodes"] for d in tier["compounded_nodes"]}
    heard: dict[str, list[Heard]] = {}
    for cable in (c for link in graph["links"] for c in link["compounded_links"]):
        ends = [(names[e["node"]], e["interface"]) for e in cable["interfaces"]]
        hosts = [end for end in ends if end[0]["device_type"] != "switch"]
        if len(hosts) == 1:
            (host, nic), (switch, port) = hosts[0], next(e for e in ends if e not in hosts)
            heard.setdefault(host["name"], []).append(Heard(nic, switch["name"], port))
    return {host: json0(sorted(h, key=lambda x: x.interface)) for host, h in heard.items()}


def test_lldp_from_the_hosts_gives_netqs_leaves_and_says_the_tiers_above_are_unknown() -> None:
    fabric, findings = fabric_from_lldp(_heard_from_netq())
    assert len(fabric.cas) == 8 * 4 and len(fabric.switches) == 2
    analysis = analyse(fabric, NamingPolicy())
    assert {leaf.name: leaf.nodes for leaf in analysis.tree.leaves} == LEAVES
    assert analysis.tree.uppers == []  # not guessed
    (unknown,) = [f for f in findings if f.kind == FindingKind.TIERS_UNKNOWN]
    assert "2 leaf switches and nothing above them" in unknown.message


def test_what_is_not_a_switch_port_is_told_apart() -> None:
    text = json0(
        [
            Heard("eth0", "", "c4:70:bd:c5:6f:79", "mac", descr="swp16s0"),  # no SysName
            Heard("eth1", "leaf2", "a2:2e:29:11:c7:68", "mac", descr="swp2s1"),
            Heard("eth2", "gpu9", "eth2", bridge=False),  # a host back to back
        ]
    )
    assert parse_lldp(text, "gpu1") == [
        HostLink("gpu1", "eth0", "9c:63:c0:00:00:01", "swp16s0"),
        HostLink("gpu1", "eth1", "leaf2", "swp2s1"),
    ]


def test_an_empty_or_broken_output_is_a_finding_not_a_guess() -> None:
    outputs = {
        "gpu1": json0([]),
        "gpu2": '{"lldp": "no"}',
        "gpu3": json0([Heard("e0", "l", "swp1")]),
    }
    fabric, findings = fabric_from_lldp(outputs)
    kinds = {(f.subject, f.kind) for f in findings}
    assert ("gpu1", FindingKind.COLLECT_MISSING) in kinds
    assert ("gpu2", FindingKind.COLLECT_PARSE_ERROR) in kinds
    assert [ca.description for ca in fabric.cas.values()] == ["gpu3 e0"]
    with pytest.raises(ParseError):
        parse_lldp("[", "gpu2")


def test_generate_reads_lldp_from_a_snapshot(tmp_path: Path) -> None:
    snap = write_node_outputs(
        tmp_path / "snap", {host: {KEY_LLDP: text} for host, text in _heard_from_netq().items()}
    )
    out, report = tmp_path / "topology.conf", tmp_path / "report.txt"
    args = ["--config", os.devnull, "generate", "--snapshot", str(snap), "--slurm-nodes", "all"]
    result = CliRunner().invoke(main, [*args, "-o", str(out), "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "SwitchName=net-unit-l1 Nodes=dgx-[01-04]" in out.read_text()
    assert "[tiers-unknown]" in report.read_text()


def test_collect_lldp_stores_each_nodes_output(
    fake: FakeCluster,
    tmp_path: Path,
) -> None:
    fake.healthy("gb1", 1)
    printed = json0([Heard("eth0", "leaf1", "swp3")])
    _exe(
        fake.root / "bin" / "lldpcli",
        f"#!/bin/sh\necho \"$@\" > {fake.root}/lldp.args\ncat <<'X'\n{printed}\nX\n",
    )
    snap = tmp_path / "snap"
    args = ["--nodes", "gb1", "--out-dir", str(snap), "--timeout", "5", "--lldp"]
    result = CliRunner().invoke(collect_command, args, obj={})
    assert result.exit_code == 0, result.output
    assert (fake.root / "lldp.args").read_text().split() == [
        "-f",
        "json0",
        "show",
        "neighbors",
        "details",
    ]
    assert (snap / "nodes" / "gb1" / f"{KEY_LLDP}.txt").read_text().strip() == printed.strip()
