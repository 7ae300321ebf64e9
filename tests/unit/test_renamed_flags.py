"""Each flag renamed by the one-concept-one-flag surface (docs/cli.md) still works under its
old spelling for one release, with exactly one deprecation line on stderr: generate
--report-format, collect --snapshot/--partition, bench --record (tests/unit/test_bench_cli.py),
spank build -o/--outdir, units -o/--output/--metrics/--config and its DIR argument."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.unit.test_collect import FakeCluster
from tests.unit.test_collect import fake as fake
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

TAIL = "; the old spelling goes in the next release"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


def warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if "warning:" in line]


def test_generate_report_format_is_json(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    args = ["generate", "--sim", "demo", "-o", str(tmp_path / "t.conf"), "--report", str(report)]
    old = run(*args, "--report-format", "json")
    assert old.exit_code == Exit.OK, old.output
    assert warnings(old) == [f"topograph-slurm: warning: --report-format is now --json{TAIL}"]
    assert json.loads(report.read_text())["format"] == "topograph-slurm-report"
    new = run(*args, "--json")
    assert new.exit_code == Exit.OK and warnings(new) == []
    assert json.loads(report.read_text())["format"] == "topograph-slurm-report"


def test_generate_json_prints_the_report_instead_of_the_topology() -> None:
    result = run("generate", "--sim", "demo", "--json")
    assert result.exit_code == Exit.OK, result.output
    data = json.loads(result.stdout)
    assert (data["format"], data["version"], data["nodes"]) == ("topograph-slurm-report", 1, 32)


@pytest.mark.parametrize("old", ["--snapshot", "--partition"])
def test_collect_old_spellings(fake: FakeCluster, tmp_path: Path, old: str) -> None:
    fake.healthy("gb1", 1)
    snap = tmp_path / "snap"
    args = ["collect", "--nodes", "gb1", "--timeout", "5"]
    args += ["--snapshot", str(snap)] if old == "--snapshot" else ["--out-dir", str(snap)]
    args += ["--partition", "gpu"] if old == "--partition" else []
    result = run(*args)
    assert result.exit_code == Exit.OK, result.output
    new = "--out-dir" if old == "--snapshot" else "--srun-partition"
    assert warnings(result) == [f"topograph-slurm: warning: {old} is now {new}{TAIL}"]
    assert (snap / "manifest.json").is_file()


def test_collect_json_says_per_node_what_happened(fake: FakeCluster, tmp_path: Path) -> None:
    fake.healthy("gb1", 1)
    result = run("collect", "--nodes", "gb1,down1", "--out-dir", str(tmp_path / "s"), "--json")
    assert result.exit_code == Exit.OK, result.output
    data = json.loads(result.stdout)
    assert (data["format"], data["version"]) == ("topograph-slurm-collect", 1)
    assert (data["ok_nodes"], data["failed_nodes"]) == (["gb1"], ["down1"])
    assert {r["node"] for r in data["results"] if not r["ok"]} == {"down1"}


def test_collect_without_out_dir_is_a_usage_error() -> None:
    result = run("collect", "--nodes", "gb1")
    assert result.exit_code == Exit.USAGE
    assert result.stderr.startswith(
        "topograph-slurm: error: collect writes a snapshot: give --out-dir DIR (see "
    )


@pytest.mark.parametrize("old", ["-o", "--outdir"])
def test_spank_build_out_dir(tmp_path: Path, old: str) -> None:
    """The old spelling reaches the build (which then says its source is missing)."""
    result = run("spank", "build", "--source", str(tmp_path / "absent.c"), old, str(tmp_path))
    assert result.exit_code == Exit.COLLECT
    assert result.stderr.splitlines()[0] == (
        f"topograph-slurm: warning: {old} is now --out-dir{TAIL}"
    )
    assert len(warnings(result)) == 1 and "run generate --filter-dir first" in result.stderr


UNIT_FLAGS = [
    ("-o", "--service-output", "/etc/slurm/t.conf", "generate -o /etc/slurm/t.conf "),
    ("--output", "--service-output", "/etc/slurm/t.conf", "generate -o /etc/slurm/t.conf "),
    ("--metrics", "--service-metrics", "/var/lib/p/t.prom", "--metrics /var/lib/p/t.prom\n"),
    ("--config", "--service-config", "/etc/ts/c.yaml", "--config /etc/ts/c.yaml generate"),
]


@pytest.mark.parametrize(("old", "new", "value", "seen"), UNIT_FLAGS)
def test_units_service_paths(old: str, new: str, value: str, seen: str) -> None:
    result = run("units", "--print", "service", "--binary", "/usr/bin/t", old, value)
    assert result.exit_code == Exit.OK, result.output
    assert warnings(result) == [f"topograph-slurm: warning: {old} is now {new}{TAIL}"]
    assert seen in result.stdout


def test_units_dir_argument_is_out_dir(tmp_path: Path) -> None:
    result = run("units", str(tmp_path), "--binary", "/usr/bin/t")
    assert result.exit_code == Exit.OK, result.output
    assert warnings(result) == [
        f"topograph-slurm: warning: the DIR argument is now --out-dir DIR{TAIL}"
    ]
    assert (tmp_path / "topograph-slurm.timer").is_file()
