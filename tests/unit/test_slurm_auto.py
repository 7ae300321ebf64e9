"""The ``auto`` defaults: Slurm's node list and release when scontrol answers, every host and
24.11 otherwise, and a note in the report either way.

The scontrol answers are the shapes 24.11.5 and 26.05.5 print (``slurm-wlm 26.05.5``; the node
table's ``nodes[].name``), replayed by a stand-in program through the real subprocess path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.scontrol import Answer, ReplayScontrol
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import LEVEL_INFO, LEVEL_PROBLEM, Finding
from topograph_slurm.slurm.auto import node_list, resolve_version

NODES_JSON = json.dumps({"nodes": [{"name": f"gpu{i:04d}", "state": ["IDLE"]} for i in (1, 2, 3)]})
VERSION_2605 = Answer("slurm-wlm 26.05.5\n")
DOWN = Answer(stderr="slurm_load_node error: Unable to contact slurm controller\n", code=1)


def settings(scontrol: str, **values: object) -> Settings:
    return Settings(scontrol=scontrol, **values)  # type: ignore[arg-type]


def test_without_scontrol_every_host_and_24_11_with_info_notes(tmp_path: Path) -> None:
    absent = str(tmp_path / "nowhere" / "scontrol")
    notes: list[Finding] = []
    assert node_list(settings(absent), notes) is None
    assert resolve_version(settings(absent), notes).slurm_version == "24.11"
    assert [(n.kind, n.level) for n in notes] == [
        (FindingKind.SLURM_NODES, LEVEL_INFO),
        (FindingKind.SLURM_VERSION, LEVEL_INFO),
    ]
    assert notes[0].message.endswith("every host is a node")
    assert notes[1].message.endswith("24.11 assumed")


def test_scontrol_answers_nodes_and_version(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(
        tmp_path, {"show nodes --json": Answer(NODES_JSON), "--version": VERSION_2605}
    )
    notes: list[Finding] = []
    assert node_list(settings(str(scontrol.path)), notes) == {"gpu0001", "gpu0002", "gpu0003"}
    assert resolve_version(settings(str(scontrol.path)), notes).slurm_version == "26.05.5"
    assert [n.message for n in notes] == [
        "3 nodes from `scontrol show nodes --json`; other hosts are excluded",
        "Slurm 26.05.5 (`" + str(scontrol.path) + " --version`)",
    ]


def test_sinfo_beside_a_failing_scontrol_tells_the_version(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(tmp_path, {"--version": Answer(code=1)})
    ReplayScontrol(tmp_path, {"--version": Answer("slurm-wlm 24.11.5\n")}, name="sinfo")
    notes: list[Finding] = []
    assert resolve_version(settings(str(scontrol.path)), notes).slurm_version == "24.11.5"
    assert notes[0].subject == str(tmp_path / "sinfo")


def test_installed_but_not_answering_is_a_problem(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(tmp_path, {"show nodes --json": DOWN})
    notes: list[Finding] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path))  # scontrol is on PATH, so it is installed
        assert node_list(settings("scontrol"), notes) is None
    assert notes[0].level == LEVEL_PROBLEM and "Unable to contact" in notes[0].message
    assert scontrol.calls == ["show nodes --json"]


@pytest.mark.parametrize("value", ["all", "gpu[0001-0002]"])
def test_explicit_values_ask_nothing(tmp_path: Path, value: str) -> None:
    scontrol = ReplayScontrol(tmp_path, {})
    notes: list[Finding] = []
    node_list(settings(str(scontrol.path), slurm_nodes=value), notes)
    resolve_version(settings(str(scontrol.path), slurm_version="25.05"), notes)
    assert notes == [] and scontrol.calls == []


def _generate(*args: str) -> str:
    result = CliRunner().invoke(main, ["--config", "/dev/null", "generate", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_auto_without_slurm_gives_the_output_of_before(tmp_path: Path) -> None:
    """The defaults changed from 'every host, 24.11' to auto: without Slurm, the same bytes."""
    sim = ("--sim", "nodes=16,rails=2,su=4,tiers=2", "--format", "block")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path))  # no scontrol, no sinfo
        auto = _generate(*sim)
    assert auto == _generate(*sim, "--slurm-nodes", "all", "--slurm-version", "24.11")


def test_auto_with_slurm_places_only_its_nodes(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(
        tmp_path, {"show nodes --json": Answer(NODES_JSON), "--version": VERSION_2605}
    )
    config = tmp_path / "config.yaml"
    config.write_text(f"scontrol: {scontrol.path}\n")
    result = CliRunner().invoke(
        main, ["--config", str(config), "generate", "--sim", "nodes=4,rails=1,su=2,tiers=2"]
    )
    assert result.exit_code == 0, result.output
    assert "Nodes=gpu[0001-0002]" in result.stdout and "gpu0004" not in result.stdout


def test_a_check_elsewhere_says_the_environment_differs_and_what_to_pin(tmp_path: Path) -> None:
    """Issue 24: a file written where scontrol lists 30 of 32 nodes was "out of date" on a CI
    runner without Slurm with no word why. Its header names the release and the node list;
    the check says what differs and which flags pin it; pinned, the check matches."""
    nodes = json.dumps({"nodes": [{"name": f"gpu{i:04d}"} for i in range(1, 31)]})
    scontrol = ReplayScontrol(
        tmp_path / "bin", {"show nodes --json": Answer(nodes), "--version": VERSION_2605}
    )
    out = tmp_path / "topology.conf"
    args = ["--config", "/dev/null", "generate", "--sim", "demo", "-o", str(out)]
    controller = {"PATH": f"{scontrol.path.parent}:/usr/bin:/bin"}
    runner = CliRunner()
    assert runner.invoke(main, args, env=controller).exit_code == 0
    header = out.read_text().splitlines()[2]
    assert header == "# Made for Slurm 26.05.5; node list: Slurm's nodes."
    again = runner.invoke(main, args, env=controller)  # the same inputs: the same bytes
    assert again.exit_code == 0 and "unchanged (30 nodes)" in again.stderr
    ci = {"PATH": str(tmp_path / "empty")}
    stale = runner.invoke(main, [*args, "--check"], env=ci)
    assert stale.exit_code == 1
    line = [line for line in stale.stderr.splitlines() if "out of date" in line]
    assert line == [
        f"{out}: out of date; the environment differs: Slurm 26.05.5 then, 24.11 now "
        "(--slurm-version auto: Slurm did not answer, assumed): pin --slurm-version 26.05.5; "
        "node list Slurm's nodes then, every host now (--slurm-nodes auto: Slurm did not "
        "answer): pin "
        "--slurm-nodes (the nodes' hostlist, or all)"
    ]
    pins = ["--slurm-version", "26.05.5", "--slurm-nodes", "gpu[0001-0030]"]
    pinned = runner.invoke(main, [*args, "--check", *pins], env=ci)
    assert pinned.exit_code == 0 and f"{out}: up to date" in pinned.stderr
    other = [*args[:4], "nodes=16,rails=2,su=4,tiers=2", *args[5:], "--check", *pins]
    fabric = runner.invoke(main, other, env=ci)
    assert (
        fabric.exit_code == 1 and "the environment differs" not in fabric.stderr
    )  # the fabric changed
