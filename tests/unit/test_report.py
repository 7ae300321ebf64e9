"""The report as users read it: what is folded, what is inferred, what is escaped.

End to end through ``generate`` on simulated dumps edited the way real fabrics go wrong (one
node's HCAs left with firmware-default descriptions, control characters in descriptions), and
on a snapshot holding NVIDIA topograph's two-column nvidia-smi output.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from tests.support.snapshots import write_node_outputs
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import REASON_DEFAULT, REASON_SHARP, NamingPolicy
from topograph_slurm.analysis.fabric.unnamed import find_unnamed
from topograph_slurm.cli.main import main
from topograph_slurm.model import names
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.render.environment import environment, printable
from topograph_slurm.render.report import render_report
from topograph_slurm.sources import ibnetdiscover, sim
from topograph_slurm.sources.node_name_map import parse_node_name_map
from topograph_slurm.sources.snapshot import KEY_QUERY

DEMO = "nodes=32,gpus=8,rails=8,su=8,tiers=2,sharp=1"
FIRMWARE = "MT4129 ConnectX7 Mellanox Technologies"
ALL_NODES = "gpu[0001-0032]"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, "generate", *args])


def _dump(tmp_path: Path, *unnamed: str, edit: dict[str, str] | None = None) -> Path:
    """The demo fabric with *unnamed* nodes' HCAs left at the firmware-default description."""
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec(DEMO))
    for node in unnamed:
        text = re.sub(rf'"{node} mlx5_\d+"', f'"{FIRMWARE}"', text)
    for old, new in (edit or {}).items():
        text = text.replace(old, new)
    path = tmp_path / "fabric.txt"
    path.write_bytes(text.encode())
    return path


def _report(tmp_path: Path, *args: str, fmt: str = "text") -> str:
    out = tmp_path / f"report.{fmt}"
    as_json = ["--json"] if fmt == "json" else []
    result = run(*args, "--report", str(out), *as_json, "-o", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    return out.read_text()


# --------------------------------------------------------------------------- unnamed nodes


def test_missing_node_found_unnamed_and_its_map_lines_bring_it_back(tmp_path: Path) -> None:
    dump = _dump(tmp_path, "gpu0007")
    text = _report(tmp_path, "--ibnetdiscover", str(dump), "--slurm-nodes", ALL_NODES)
    assert "Slurm nodes missing from the fabric (1):\n  gpu0007\n" in text
    assert (
        "gpu0007 is probably on the fabric without a host name: 8 HCAs whose descriptions "
        "name no host sit where the cabling of gpu0006 and gpu0008 puts it "
        "(port 7 of 8 leaves leaf-su001-r[0-7])"
    ) in text
    lines = [line.strip() for line in text.splitlines() if line.startswith("    0x")]
    assert len(lines) == 8 and lines[0].endswith('"gpu0007 mlx5_0"')
    mapping = parse_node_name_map("\n".join(lines))  # the format sources/node_name_map reads
    assert sorted(mapping.values()) == [f"gpu0007 mlx5_{r}" for r in range(8)]
    name_map = tmp_path / "ib-node-name-map"
    name_map.write_text("\n".join(lines) + "\n")
    again = _report(
        tmp_path,
        "--ibnetdiscover",
        str(dump),
        "--slurm-nodes",
        ALL_NODES,
        "--node-name-map",
        str(name_map),
        fmt="json",
    )
    data = json.loads(again)
    assert data["missing"] == [] and data["unnamed"] == [] and data["nodes"] == 32
    assert "gpu[0001-0008]" in (tmp_path / "t").read_text()


def _unnamed(dump: Path, slurm_nodes: str) -> dict[str, Any]:
    fabric = ibnetdiscover.parse_ibnetdiscover(dump.read_text(), str(dump))
    policy = NamingPolicy(slurm_nodes=frozenset(names.expand(slurm_nodes)))
    analysis = analyse(fabric, policy)
    return {node.node: node for node in analysis.unnamed}


def test_first_last_and_adjacent_missing_nodes_are_placed_by_their_unit(tmp_path: Path) -> None:
    expect = {"gpu0001": 1, "gpu0009": 1, "gpu0020": 4, "gpu0021": 5, "gpu0032": 8}
    found = _unnamed(_dump(tmp_path, *expect), ALL_NODES)
    assert {node: {h.port for h in hit.hcas} for node, hit in found.items()} == {
        node: {port} for node, port in expect.items()
    }
    assert found["gpu0009"].neighbours == ("gpu0010", "gpu0011")  # gpu0008 is in su001
    assert {h.leaf for h in found["gpu0020"].hcas} == {f"leaf-su003-r{r}" for r in range(8)}


def test_no_guess_without_an_unnamed_hca_at_the_predicted_port(tmp_path: Path) -> None:
    # gpu0007's HCAs are unnamed, but Slurm does not list it; the node it misses is gpu0040,
    # which no cable predicts (its nearest siblings sit on other units' ports)
    found = _unnamed(_dump(tmp_path, "gpu0007"), "gpu[0001-0006,0008-0040]")
    assert found == {}
    assert _unnamed(_dump(tmp_path), "gpu[0001-0033]") == {}  # nothing unnamed at all


def test_find_unnamed_is_empty_when_nothing_is_missing(tmp_path: Path) -> None:
    fabric = ibnetdiscover.parse_ibnetdiscover(_dump(tmp_path, "gpu0007").read_text(), "x")
    analysis = analyse(fabric, NamingPolicy())
    assert analysis.missing_nodes == [] and analysis.unnamed == []
    assert find_unnamed(fabric, analysis.hosts, [], analysis.switch_names) == []
    assert {ex.reason for ex in analysis.exclusions} == {REASON_SHARP, REASON_DEFAULT}


# --------------------------------------------------------------------------- folding


def test_sharp_nodes_are_one_line_in_text_and_each_in_json(tmp_path: Path) -> None:
    text = _report(tmp_path, "--sim", "demo")
    assert (
        "Excluded adapters (36):\n"
        "  36 x SHARP aggregation node on 36 switches (expected; each is listed in the JSON "
        "report)\n\n"
    ) in text
    assert "Aggregation Node" not in text
    data = json.loads(_report(tmp_path, "--sim", "demo", fmt="json"))
    assert [ex["reason"] for ex in data["exclusions"]] == [REASON_SHARP] * 36
    assert REASON_SHARP in data["expected_reasons"]


def test_unexpected_exclusions_are_listed_one_by_one(tmp_path: Path) -> None:
    text = _report(tmp_path, "--ibnetdiscover", str(_dump(tmp_path, "gpu0007")))
    assert text.count(f'"{FIRMWARE}" on leaf-su001-r') == 8
    assert "Excluded adapters (44):\n  36 x SHARP" in text


def _snapshot(root: Path, per_node: dict[str, str]) -> Path:
    return write_node_outputs(root, {node: {KEY_QUERY: out} for node, out in per_node.items()})


def test_topograph_two_column_snapshot_gives_domains_and_one_info_line(tmp_path: Path) -> None:
    """NVIDIA topograph's `--query-gpu=fabric.clusterUuid,fabric.cliqueId` per node: two
    racks become two blocks; the report says once that state and health were not collected,
    as information, and counts no finding."""
    uuid = "5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10"
    outputs = {f"gb{n:02d}": f"{uuid}, {1 + (n - 1) // 4}\n" * 4 for n in range(1, 9)}
    snap = _snapshot(tmp_path / "snap", outputs)
    args = ("--snapshot", str(snap), "--format", "block", "--slurm-version", "25.05")
    args += ("--slurm-nodes", "all")  # no note on where Slurm's node list came from
    text = _report(tmp_path, *args)
    topology = (tmp_path / "t").read_text()
    assert "BlockName=nvl-gb01 Nodes=gb[01-04]" in topology
    assert "BlockName=nvl-gb05 Nodes=gb[05-08]" in topology
    assert "Information: 8.  Findings: 0." in text
    assert "Findings (0):\n  none\n" in text
    info = text.split("Information (8):\n", 1)[1].splitlines()
    assert info[0].startswith(
        f"  [{FindingKind.FABRIC_STATE_NOT_COLLECTED}] gb[01-08]: fabric State,"
    )
    assert "State N/A" not in text
    data = json.loads(_report(tmp_path, *args, fmt="json"))
    notes = [f for f in data["findings"] if f["kind"] == FindingKind.FABRIC_STATE_NOT_COLLECTED]
    assert len(notes) == 8 and {f["level"] for f in data["findings"]} == {"info"}


# --------------------------------------------------------------------------- escaping

HOSTILE = {
    '"gpu0003 mlx5_0"': '"gpu0003\x1b[2J mlx5_0\x07"',
    '"gpu0004 mlx5_1"': '"MT4129\x1b]0;owned\x07 ConnectX7 Mellanox Technologies\r"',
}


def _control(text: str) -> list[str]:
    return [c for c in text if not c.isprintable() and c != "\n"]


def test_control_characters_from_the_fabric_never_reach_the_text_report(tmp_path: Path) -> None:
    dump = _dump(tmp_path, edit=HOSTILE)
    assert "\x1b[2J" in dump.read_text()
    text = _report(tmp_path, "--ibnetdiscover", str(dump))
    assert _control(text) == []
    assert '"gpu0003\\x1b[2J mlx5_0\\x07"' in text
    data = json.loads(_report(tmp_path, "--ibnetdiscover", str(dump), fmt="json"))
    described = {ex["description"] for ex in data["exclusions"]}
    assert "gpu0003\x1b[2J mlx5_0\x07" in described  # JSON keeps the text, JSON-escaped


def test_the_text_environment_escapes_every_field_even_of_a_site_template(
    tmp_path: Path,
) -> None:
    """A site template printing a field the built-in one does not still gets escapes:
    the report environment's finalize applies to every expression."""
    site = tmp_path / "templates"
    site.mkdir()
    (site / "report.txt.j2").write_text(
        "{% for ex in exclusions %}{{ ex.description }}|{{ ex.leaf }}\n{% endfor %}"
    )
    dump = _dump(tmp_path, edit=HOSTILE)
    fabric = ibnetdiscover.parse_ibnetdiscover(dump.read_bytes().decode(), "x")
    text = render_report(environment(site), analyse(fabric, NamingPolicy()), None, "text")
    assert _control(text) == [] and "gpu0003\\x1b[2J mlx5_0\\x07" in text


def test_printable_escapes_controls_and_keeps_the_rest() -> None:
    assert printable("a\x1b[2Jb\x07c\rd\te\nf") == "a\\x1b[2Jb\\x07c\\rd\\te\\nf"
    assert printable("\x7f\x85\u202e\U000e0001") == "\\x7f\\x85\\u202e\\U000e0001"
    assert printable("gpu0001 mlx5_0 é ✓") == "gpu0001 mlx5_0 é ✓"
    assert printable(7) == 7


def test_error_line_escapes_control_characters(tmp_path: Path) -> None:
    """An error quoting input keeps to one line without raw control characters."""
    bad = tmp_path / "map"
    bad.write_text('0xzz\x1b[2J "n1\x07"\n')
    result = run("--sim", "demo", "--node-name-map", str(bad))
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1 and _control(result.stderr.rstrip("\n")) == []
