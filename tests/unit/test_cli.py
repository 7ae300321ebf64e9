"""`topograph-slurm generate` end to end: sources, golden output, guarded writes, bad input."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.conftest import real_dump_names, real_fixture
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
SIM_CASES = {
    "sim-2tier": "nodes=32,rails=4,su=8,tiers=2",
    "sim-3tier": "nodes=64,rails=4,su=8,tiers=3,pod=2",
    "sim-islands": "nodes=16,rails=2,su=4,islands=2",
    "sim-disagree": "nodes=16,rails=4,su=8,disagree=3,sharp=1",
}
LINE = re.compile(
    r"\A(#.*|SwitchName=[A-Za-z0-9_.-]+ (Nodes|Switches)=[A-Za-z0-9_.,\[\]-]+"
    r"|BlockName=[A-Za-z0-9_.-]+( Nodes=[A-Za-z0-9_.,\[\]-]+)?|BlockSizes=\d+(,\d+)*)\Z"
)


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args], input=stdin)


def assert_slurm_syntax(text: str) -> None:
    for line in text.splitlines():
        assert LINE.match(line), f"not valid topology.conf syntax: {line!r}"


@pytest.mark.parametrize("case", sorted(SIM_CASES))
@pytest.mark.parametrize("fmt", ["tree", "block"])
def test_golden_sim_topologies(case: str, fmt: str) -> None:
    result = run("generate", "--sim", SIM_CASES[case], "--format", fmt)
    assert result.exit_code == 0, result.output
    golden = GOLDEN / f"{case}.{fmt}.conf"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text()
    assert_slurm_syntax(result.stdout)


def test_demo_prints_a_tree_topology() -> None:
    result = run("generate", "--sim", "demo")
    assert result.exit_code == 0
    assert "SwitchName=" in result.stdout and "Switches=" in result.stdout
    assert_slurm_syntax(result.stdout)


def test_same_input_same_bytes() -> None:
    first = run("generate", "--sim", SIM_CASES["sim-3tier"], "--format", "block").stdout
    second = run("generate", "--sim", SIM_CASES["sim-3tier"], "--format", "block").stdout
    assert first == second


def test_write_only_on_change_check_and_diff(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    spec = SIM_CASES["sim-2tier"]
    assert run("generate", "--sim", spec, "-o", str(out)).exit_code == 0
    inode, mtime = out.stat().st_ino, out.stat().st_mtime_ns
    again = run("generate", "--sim", spec, "-o", str(out))
    assert again.exit_code == 0 and "unchanged" in again.stderr
    assert (out.stat().st_ino, out.stat().st_mtime_ns) == (inode, mtime)
    assert run("generate", "--sim", spec, "-o", str(out), "--check").exit_code == Exit.OK
    out.write_text(out.read_text().replace("Switches=", "Switches=extra,"))
    stale = out.read_text()
    check = run("generate", "--sim", spec, "-o", str(out), "--check")
    assert check.exit_code == Exit.DIFFERS
    assert "-SwitchName" in check.stdout and "+SwitchName" in check.stdout
    assert out.read_text() == stale
    diff = run("generate", "--sim", spec, "-o", str(out), "--diff")
    assert diff.exit_code == 0 and diff.stdout.startswith("---")
    assert "extra" not in out.read_text()


def test_shrink_guard_refuses_then_force(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    assert run("generate", "--sim", "nodes=32,rails=2,su=8", "-o", str(out)).exit_code == 0
    before = out.read_text()
    small = run("generate", "--sim", "nodes=16,rails=2,su=8", "-o", str(out))
    assert small.exit_code == Exit.REFUSED
    assert small.stderr.count("\n") == 1 and "--force" in small.stderr
    assert out.read_text() == before
    forced = run("generate", "--sim", "nodes=16,rails=2,su=8", "-o", str(out), "--force")
    assert forced.exit_code == 0 and out.read_text() != before


#: Slurm's node list and release given, so no run asks scontrol (and notes where they came from).
PINNED_SLURM = ("--slurm-nodes", "all", "--slurm-version", "24.11")


def test_report_json_lists_exclusions_and_findings(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = run(
        "generate",
        "--sim",
        SIM_CASES["sim-disagree"],
        "--report",
        str(report),
        "--json",
        *PINNED_SLURM,
    )
    assert result.exit_code == 0
    data = json.loads(report.read_text())
    assert data["nodes"] == 16
    sharp = [ex for ex in data["exclusions"] if ex["reason"] == "SHARP aggregation node"]
    assert sharp and all(ex["leaf"] for ex in sharp)
    assert [f["kind"] for f in data["findings"]] == ["rail-disagreement"]


def _write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", Exit.INPUT),
        (b"\x00\xff\xfe\x89PNG\r\n\x1a\n" * 50, Exit.INPUT),
        (
            b'vendid=0x2c9\ndevid=0xd2f2\nswitchguid=0x1(1)\nSwitch\t36 "S-0000000000000001"',
            Exit.INPUT,
        ),
    ],
    ids=["empty", "binary", "cut-mid-block"],
)
def test_bad_dumps_are_one_line_and_write_nothing(tmp_path: Path, data: bytes, code: int) -> None:
    out = tmp_path / "topology.conf"
    out.write_text("SwitchName=s1 Nodes=n[1-4]\n")
    result = run("generate", "--ibnetdiscover", _write(tmp_path, "d.txt", data), "-o", str(out))
    assert result.exit_code == code, result.output
    assert result.stderr.startswith("topograph-slurm: error: ")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
    assert out.read_text() == "SwitchName=s1 Nodes=n[1-4]\n"


def test_usage_and_config_errors_have_distinct_codes(tmp_path: Path) -> None:
    assert run("generate", "--format", "ring").exit_code == Exit.USAGE
    assert run("generate", "--sim", "nodes=x").exit_code in (Exit.USAGE, Exit.CONFIG)
    bad = tmp_path / "c.yaml"
    bad.write_text("formatt: tree\n")
    result = CliRunner().invoke(main, ["--config", str(bad), "generate", "--sim", "demo"])
    assert result.exit_code == Exit.CONFIG and "formatt" in result.stderr
    missing = run("generate", "--ibnetdiscover", str(tmp_path / "absent.txt"))
    assert missing.exit_code == Exit.INPUT
    assert run("generate", "--sim", "demo", "--check").exit_code == Exit.USAGE


def test_hostile_names_never_reach_topology_unsanitised(tmp_path: Path) -> None:
    dump = (
        "vendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x10\nswitchguid=0x10(10)\n"
        'Switch\t4 "S-0000000000000010"\t\t# "MF0;we\\"ird=sw itch\u00e9:MQM9790/U1" '
        "enhanced port 0 lid 1 lmc 0\n"
        '[1]\t"H-0000000000000021"[1](21)\t\t# "gpu01 mlx5_0" lid 2 4xNDR\n'
        '[2]\t"H-0000000000000022"[1](22)\t\t# "gpu=02 mlx5_0" lid 3 4xNDR\n'
        '[3]\t"H-0000000000000023"[1](23)\t\t# "gpü03 mlx5_0" lid 4 4xNDR\n'
        '[4]\t"H-0000000000000024"[1](24)\t\t# "gpu04,x mlx5_0" lid 5 4xNDR\n'
    )
    result = run(
        "generate",
        "--ibnetdiscover",
        "-",
        "--report",
        "-",
        "-o",
        str(tmp_path / "t.conf"),
        stdin=dump,
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "t.conf").read_text()
    assert_slurm_syntax(text)
    assert "Nodes=gpu01\n" in text
    for bad in ("gpu=02", "gpü03", "gpu04,x"):
        assert bad not in text and bad in result.stdout


REAL_DUMPS = real_dump_names()


@pytest.mark.parametrize("name", REAL_DUMPS)
def test_every_real_dump_generates_or_explains(name: str, tmp_path: Path) -> None:
    dump = real_fixture(f"ibnetdiscover/{name}")
    report = tmp_path / "r.json"
    for fmt in ("tree", "block"):
        result = run(
            "generate",
            "--ibnetdiscover",
            str(dump),
            "--format",
            fmt,
            "--slurm-version",
            "25.05",
            "--report",
            str(report),
            "--json",
        )
        data = json.loads(report.read_text())
        if data["nodes"] == 0:  # every HCA excluded: an error, but the report says why
            assert result.exit_code == Exit.INPUT
            assert data["exclusions"] and all(ex["reason"] for ex in data["exclusions"])
            continue
        assert result.exit_code == 0, result.output
        assert_slurm_syntax(result.stdout)
        assert data["node_hcas"] + len(data["exclusions"]) == data["cas"]  # nothing dropped


def test_check_filter_dir_without_output_checks_only_the_filters(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("filter:\n  partitions:\n    gpu: {topology: block, gpus_per_node: 4}\n")
    args = [
        "--config",
        str(config),
        "generate",
        "--sim",
        SIM_CASES["sim-2tier"],
        "--filter-dir",
        str(tmp_path / "f"),
    ]
    stale = CliRunner().invoke(main, [*args, "--check"])
    assert stale.exit_code == Exit.DIFFERS and "SwitchName" not in stale.stdout
    assert not (tmp_path / "f").exists()
    assert CliRunner().invoke(main, args).exit_code == 0
    fresh = CliRunner().invoke(main, [*args, "--check"])
    assert fresh.exit_code == Exit.OK and fresh.stdout == ""


def test_output_to_a_fifo_is_written_through(tmp_path: Path) -> None:
    """As ``-o /dev/null`` would be: the topology goes in, the target stays what it was."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = run("generate", "--sim", "demo", "-o", str(fifo))
    reader.join(10)
    assert result.exit_code == 0, result.output
    assert received and received[0].decode() == run("generate", "--sim", "demo").output
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def _one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topograph-slurm: error:"), result.stderr
    return lines[0]


@pytest.mark.parametrize("limit", ["-1", "nan"])
def test_a_negative_or_nan_shrink_limit_is_a_usage_error(tmp_path: Path, limit: str) -> None:
    target = tmp_path / "topology.conf"
    result = run("generate", "--sim", "demo", "-o", str(target), "--shrink-limit", limit)
    assert result.exit_code == Exit.USAGE, result.output
    assert not target.exists()


def test_a_report_that_cannot_be_written_exits_9_and_writes_nothing(tmp_path: Path) -> None:
    report = tmp_path / "missing-dir" / "report.txt"
    result = run("generate", "--sim", "demo", "--report", str(report))
    assert result.exit_code == Exit.OUTPUT, result.output
    assert str(report) in _one_error_line(result)
    assert not report.parent.exists()


def test_the_report_is_replaced_atomically(tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    report.write_text("old\n")
    assert run("generate", "--sim", "demo", "--report", str(report)).exit_code == 0
    assert "old" not in report.read_text() and report.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]  # no temp file left


@pytest.mark.parametrize("enabled", [True, False])
def test_generate_leaves_the_callers_gc_setting_as_it_was(enabled: bool) -> None:
    import gc

    (gc.enable if enabled else gc.disable)()
    try:
        assert run("generate", "--sim", "demo").exit_code == 0
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_a_broken_topology_template_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "topology.conf.tree.j2").write_text("{% for x in %}\n")
    result = run("generate", "--sim", "demo", "--templates", str(tmp_path))
    assert result.exit_code == Exit.CONFIG, result.output
    assert "topology.conf.tree.j2" in _one_error_line(result)


def test_an_in_process_caller_gets_the_exit_code_back() -> None:
    """benchmarks/bench_parse.py calls main(standalone_mode=False): it must return, not exit."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["--config", os.devnull, "generate", "--sim", "demo"], standalone_mode=False)
    assert code == 0 and "SwitchName=" in out.getvalue()


def test_output_dash_is_stdout_and_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["--config", os.devnull, "generate", "--sim", "demo", "--slurm-nodes", "all", "-o", "-"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "\nSwitchName=spine-001 " in result.stdout and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["r.html", "R.HTM"])
def test_an_html_report_with_another_format_is_refused_and_nothing_written(
    tmp_path: Path, name: str
) -> None:
    """--report r.html --json (then --report-format json) once wrote an HTML page anyway."""
    report = tmp_path / name
    result = run(
        "generate", "--sim", "nodes=8", "--report", str(report), "--json",
        "-o", str(tmp_path / "topology.conf"),
    )  # fmt: skip
    assert result.exit_code == Exit.USAGE, result.output
    assert result.stderr.strip().splitlines() == [
        f"topograph-slurm: error: --report {report} is an HTML page around the text report: "
        "drop --json or name another file"
    ]
    assert list(tmp_path.iterdir()) == []
