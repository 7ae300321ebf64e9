"""Hostile input at the CLI edge: every bad value, file or name gives one line and its exit
code, and nothing is written.

The layout (``--layout``, or the previous ``-o`` file read back as one) is the reader of our own
files, so it is where names from a file are checked; a huge hostlist is refused before
ClusterShell builds its names; the fuzz tests throw random flag values, config files, manifests,
layouts and node-name maps at the whole command.
"""

from __future__ import annotations

import json
import os
import string
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_generate_snapshot import make_snapshot
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings, state_dir
from topograph_slurm.errors import Exit, InputError
from topograph_slurm.sources.snapshot import SNAPSHOT_FORMAT, SNAPSHOT_VERSION
from topograph_slurm.sources.summary import load_summary, summary_path

TINY = "nodes=4,rails=1,su=2"
OLD = "SwitchName=s1 Nodes=n[1-4]\n"


def invoke(args: list[str], config: str = os.devnull) -> Result:
    return CliRunner().invoke(main, ["--config", config, *args])


def assert_refused(result: Result, code: int, target: Path | None = None) -> str:
    """Exit *code*, exactly one ``topograph-slurm: error:`` line, no traceback, *target* as
    it was; returns the line."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.stderr.startswith("topograph-slurm: error: ")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert "Traceback" not in result.output
    if target is not None:
        assert target.read_text() == OLD
    return result.stderr


def assert_clean(result: Result, target: Path) -> None:
    """Whatever the outcome: never a bug, never a traceback; a failure is one line and leaves
    *target* untouched."""
    assert result.exit_code != Exit.BUG, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code not in (Exit.OK, Exit.DIFFERS):
        assert_refused(result, result.exit_code, target)


# --------------------------------------------------------------------------- layout names


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return make_snapshot(tmp_path / "snap")


HOSTILE_NAMES = {
    "newline": "nvl-x\nSwitchName=evil Nodes=gpu0001",
    "space": "a b",
    "equals": "a=b",
    "hash": "a#b",
    "65 chars": "x" * 65,
    "empty": "",
    "escape": "\x1b[31mred",
}


@pytest.mark.parametrize("name", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
@pytest.mark.parametrize("previous", [False, True], ids=["--layout", "previous -o"])
def test_a_hostile_block_name_in_a_layout_is_refused(
    tmp_path: Path, snapshot: Path, name: str, previous: bool
) -> None:
    """A racks list (YAML) naming a block that Slurm cannot read: exit 3 naming the file."""
    layout = tmp_path / "layout.yaml"
    layout.write_text(yaml.safe_dump([{"block": name, "nodes": "gpu[0001-0004]"}]))
    target = tmp_path / "topology.conf"
    target.write_text(OLD)
    args = ["generate", "--snapshot", str(snapshot), "--format", "block"]
    args += ["--slurm-version", "25.05", "-o", str(target)]
    if previous:  # the -o file is read as the layout: here a topology.yaml someone edited
        blocks = {"block_sizes": [4], "blocks": [{"block": name, "nodes": "gpu[0001-0004]"}]}
        target.write_text(yaml.safe_dump([{"topology": "nvl", "block": blocks}]))
    else:
        args += ["--layout", str(layout)]
    before = target.read_text()
    result = invoke(args)
    assert result.exit_code == Exit.INPUT, result.output
    line = result.stderr
    assert line.count("\n") == 1 and line.startswith("topograph-slurm: error: ")
    assert str(target if previous else layout) in line and "invalid block name" in line
    assert "\x1b" not in line  # shown escaped, never sent to the terminal
    assert target.read_text() == before


@pytest.mark.parametrize(
    "line",
    [
        "BlockName=a=b Nodes=gpu[0001-0004]",
        "BlockName= Nodes=gpu[0001-0004]",
        f"BlockName={'x' * 65} Nodes=gpu[0001-0004]",
        "BlockName=ok Nodes=gpu[0001-0004],bad=node",
    ],
    ids=["equals", "empty", "65 chars", "bad node"],
)
def test_a_hostile_topology_conf_layout_is_refused(
    tmp_path: Path, snapshot: Path, line: str
) -> None:
    layout = tmp_path / "topology.conf.old"
    layout.write_text(f"{line}\nBlockSizes=4\n")
    target = tmp_path / "topology.conf"
    target.write_text(OLD)
    args = ["generate", "--snapshot", str(snapshot), "--format", "block"]
    result = invoke([*args, "--slurm-version", "25.05", "--layout", str(layout), "-o", str(target)])
    assert str(layout) in assert_refused(result, Exit.INPUT, target)


def test_the_block_renderer_checks_names_itself() -> None:
    """Defence in depth: a name no reader checked still never reaches topology.conf."""
    from topograph_slurm.errors import ConfigError
    from topograph_slurm.model.result import Block, BlockTopology
    from topograph_slurm.render.topology_yaml import check_names

    with pytest.raises(ConfigError, match="invalid block name 'a\\\\nb'"):
        check_names(None, BlockTopology([Block("a\nb", ["n1"])], [1]))


# --------------------------------------------------------------------------- exit 70 or a hang


@pytest.mark.parametrize(
    "args",
    [
        ["generate", "--sim", TINY, "--slurm-nodes", "n[1-20000000]"],
        ["collect", "--nodes", "n[1-20000000]", "--out-dir", "SNAP"],
        ["collect", "--nodes", "n[1-1000]-[1-1000]-[1-1000]", "--out-dir", "SNAP"],
    ],
    ids=["--slurm-nodes", "collect --nodes", "collect --nodes 3 axes"],
)
def test_a_huge_hostlist_is_refused_before_it_is_expanded(tmp_path: Path, args: list[str]) -> None:
    snap = tmp_path / "snap"
    result = invoke([str(snap) if arg == "SNAP" else arg for arg in args])
    assert result.exit_code in (Exit.USAGE, Exit.INPUT), result.output
    assert "more than 1,000,000" in assert_refused(result, result.exit_code)
    assert not snap.exists()


def test_a_huge_hostlist_in_a_layout_is_refused(tmp_path: Path, snapshot: Path) -> None:
    layout = tmp_path / "racks.yaml"
    layout.write_text("- {block: r1, nodes: 'gpu[1-20000000]'}\n")
    result = invoke(
        ["generate", "--snapshot", str(snapshot), "--format", "block", "--layout", str(layout)]
    )
    assert str(layout) in assert_refused(result, Exit.INPUT)


def test_the_shrink_guard_counts_a_huge_old_hostlist_without_expanding_it(tmp_path: Path) -> None:
    """The old file says 20M nodes: the guard refuses (exit 6) at once instead of hanging."""
    target = tmp_path / "topology.conf"
    target.write_text("SwitchName=s1 Nodes=n[1-20000000]\n")
    result = invoke(["generate", "--sim", TINY, "-o", str(target)])
    assert "20000000 to 4" in assert_refused(result, Exit.REFUSED)


def test_a_huge_simulated_fabric_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """``--sim nodes=100000000`` would write gigabytes of dump text for minutes first."""
    target = tmp_path / "topology.conf"
    result = invoke(["generate", "--sim", "nodes=100000000,tiers=3", "-o", str(target)])
    assert "nodes must be <= 65,536" in assert_refused(result, Exit.USAGE)
    assert not target.exists()


def test_a_rewrite_that_backtracks_catastrophically_ends_the_run_with_one_error(
    tmp_path: Path,
) -> None:
    """Node names of 31 a's: ``(a|aa|aaa)+b`` backtracks exponentially on each description."""
    target = tmp_path / "topology.conf"
    sim = "nodes=2,su=2,rails=1,prefix=" + "a" * 31
    result = invoke(["generate", "--sim", sim, "--rewrite", "(a|aa|aaa)+b=>x", "-o", str(target)])
    assert "backtracks catastrophically" in assert_refused(result, Exit.CONFIG)
    assert not target.exists()


def _manifest(results: object) -> str:
    return json.dumps({"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, "results": results})


@pytest.mark.parametrize(
    "text",
    [
        _manifest("[" * 1000 + "]" * 1000).replace('"[', "[").replace(']"', "]"),
        _manifest([{"node": "n1", "command": "x", "exit_code": 0, "file": "a\x00b"}]),
        _manifest([{"node": "n1\nn2", "command": "x", "exit_code": 1}]),
    ],
    ids=["nested 1000 deep", "NUL in a file name", "newline in a node name"],
)
def test_a_hostile_manifest_is_bad_input(tmp_path: Path, text: str) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "manifest.json").write_text(text)
    assert_refused(invoke(["generate", "--snapshot", str(snap)]), Exit.INPUT)


def test_a_non_utf8_config_is_exit_5_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(b"format: tree\nreport: \xfe\xff\n")
    line = assert_refused(invoke(["generate", "--sim", TINY], str(config)), Exit.CONFIG)
    assert str(config) in line and "not UTF-8" in line


def test_an_invalid_group_reference_in_a_rewrite_is_a_usage_error() -> None:
    result = invoke(["generate", "--sim", TINY, "--rewrite", r"x=>\9"])
    line = assert_refused(result, Exit.USAGE)
    assert "invalid rewrite replacement '\\\\9': invalid group reference" in line


# ------------------------------------------------------------- kept state, Slurm's answers

DEEP = b"[" * 100_000 + b"]" * 100_000


def _kept(tmp_path: Path) -> tuple[Path, Path]:
    """A topology and the summary a first run kept for it (in the default state dir)."""
    target = tmp_path / "topology.conf"
    assert invoke(["generate", "--sim", "nodes=16,su=8", "-o", str(target)]).exit_code == Exit.OK
    return target, summary_path(target, state_dir(Settings()))


def _again(target: Path, spec: str = "nodes=16,su=8") -> Result:
    report = target.parent / "report.json"
    args = ["generate", "--sim", spec, "-o", str(target), "--slurm-nodes", "gpu[0001-0016]"]
    return invoke([*args, "--report", str(report), "--json"])


def _unreadable(target: Path) -> str:
    findings = json.loads((target.parent / "report.json").read_text())["findings"]
    (bad,) = [f for f in findings if f["kind"] == "summary-unreadable"]
    return str(bad["message"])


@pytest.mark.parametrize(
    "content",
    [b'{"format": "topograph-slurm-fabric-summary", "version": 1, "summary": ' + DEEP + b"}"],
    ids=["nested 100,000 deep"],
)
def test_a_deep_kept_summary_is_unreadable_for_generate_and_bad_input_for_diff(
    tmp_path: Path, content: bytes
) -> None:
    target, kept = _kept(tmp_path)
    good = tmp_path / "good.json"
    good.write_bytes(kept.read_bytes())
    kept.write_bytes(content)
    assert_refused(invoke(["diff", str(good), str(kept)]), Exit.INPUT)
    assert_refused(invoke(["diff", str(kept), str(good)]), Exit.INPUT)
    result = _again(target)
    assert result.exit_code == Exit.OK, result.output
    assert "nested too deeply" in _unreadable(target)


def test_a_deep_bench_record_is_bad_input_for_diff(tmp_path: Path) -> None:
    _, kept = _kept(tmp_path)
    bench = tmp_path / "bench.json"
    bench.write_bytes(b'{"format": "topograph-slurm-bench", "version": 1, "levels": ' + DEEP + b"}")
    assert_refused(invoke(["diff", str(bench), str(kept)]), Exit.INPUT)
    assert_refused(invoke(["diff", str(kept), str(bench)]), Exit.INPUT)


def test_a_kept_node_last_seen_in_the_far_future_drops_out(tmp_path: Path) -> None:
    """9999-12-31 plus the keep limit overflowed the date arithmetic (exit 70)."""
    target, kept = _kept(tmp_path)
    data = json.loads(kept.read_text())
    data["summary"]["nodes"]["gpu0016"]["last_seen"] = "9999-12-31T00:00:00Z"
    kept.write_text(json.dumps(data))
    result = _again(target, "nodes=15,su=8")
    assert result.exit_code == Exit.OK, result.output
    findings = json.loads((tmp_path / "report.json").read_text())["findings"]
    (gone,) = [f for f in findings if f["subject"] == "gpu0016"]
    assert gone["kind"] == "missing-not-kept" and "in the future" in gone["message"]


@pytest.mark.parametrize("kind", ["link to /dev/zero", "FIFO"])
def test_a_kept_summary_that_is_no_regular_file_neither_hangs_nor_fills_memory(
    tmp_path: Path, kind: str
) -> None:
    """/dev/zero was read until memory ran out; a FIFO hung the read, then the write. The
    run is refused before it writes anything (as a FIFO at the lock is); the reader itself
    neither blocks nor reads a device, should one appear there during the run."""
    target, kept = _kept(tmp_path)
    kept.unlink()
    if kind == "FIFO":
        os.mkfifo(kept)
    else:
        kept.symlink_to("/dev/zero")
    target.write_text(OLD)
    result = _again(target)
    assert "not a regular file" in assert_refused(result, Exit.OUTPUT, target)
    with pytest.raises(InputError, match="not a regular file"):
        load_summary(kept)


def test_a_kept_summary_past_the_size_cap_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from topograph_slurm.sources import summary

    target, kept = _kept(tmp_path)
    monkeypatch.setattr(summary, "MAX_SUMMARY_BYTES", kept.stat().st_size - 1)
    assert _again(target).exit_code == Exit.OK
    assert "larger than" in _unreadable(target)


def _slurm_answers(tmp_path: Path, args: str, answer: object) -> str:
    """A config whose scontrol replays *answer* (JSON text) to *args*."""
    from tests.support.scontrol import Answer, ReplayScontrol

    text = answer if isinstance(answer, str) else json.dumps(answer)
    scontrol = ReplayScontrol(tmp_path / "bin", {args: Answer(text)})
    config = tmp_path / "config.yaml"
    config.write_text(f"scontrol: {scontrol.path}\n")
    return str(config)


@pytest.mark.parametrize("weight", ["Infinity", "1e400", "-1", "true", '"\\u0664"', '"3_3"'])
def test_a_hostile_weight_in_show_nodes_is_bad_input(tmp_path: Path, weight: str) -> None:
    node = f'{{"name": "gpu0001", "weight": {weight}, "features": [], "state": ["IDLE"]}}'
    config = _slurm_answers(tmp_path, "show nodes --json", f'{{"nodes": [{node}]}}')
    result = invoke(["health", "--sim", TINY], config)
    assert "unexpected `scontrol show nodes --json` output" in assert_refused(result, Exit.INPUT)


@pytest.mark.parametrize("index", ['"a"', "1e400", "Infinity", '"\\u0664"'])
def test_a_hostile_allocation_index_in_show_job_is_bad_input(tmp_path: Path, index: str) -> None:
    allocation = f'[{{"index": {index}, "name": "gpu0001"}}, {{"index": 0, "name": "gpu0002"}}]'
    job = f'{{"job_id": 7, "job_resources": {{"nodes": {{"allocation": {allocation}}}}}}}'
    config = _slurm_answers(tmp_path, "show job --json 7", f'{{"jobs": [{job}]}}')
    result = invoke(["explain", "7", "--sim", TINY], config)
    assert "unexpected `scontrol show job --json` output" in assert_refused(result, Exit.INPUT)


@pytest.mark.parametrize(
    ("rule", "missing"),
    [("{pattern: x}", "replace"), ("{replace: x}", "pattern"), ("{}", "pattern")],
)
def test_a_rewrite_without_pattern_or_replace_is_a_config_error(
    tmp_path: Path, rule: str, missing: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"rewrites:\n  - {rule}\n")
    line = assert_refused(invoke(["generate", "--sim", TINY], str(config)), Exit.CONFIG)
    assert f"config key rewrites[0].{missing} is missing" in line


# --------------------------------------------------------------------------- bench output

BENCH_SIM = "nodes=2,gpus=2,rails=2,su=2,tiers=2,prefix=bn"


def _capture() -> list[str]:
    from tests.conftest import real_fixture
    from tests.support.nccl_fake import CAPTURE

    return real_fixture(CAPTURE).read_text(encoding="utf-8").splitlines()


def _bench_with(tmp_path: Path, lines: list[str]) -> Result:
    """bench over two nodes whose every run prints *lines* and exits 0, recorded."""
    output = tmp_path / "output.txt"
    output.write_text("\n".join(lines) + "\n")
    launcher = tmp_path / "fake-srun"
    launcher.write_text(f"#!/bin/sh\ncat {output}\n")
    launcher.chmod(0o755)
    args = ["bench", "--sim", BENCH_SIM, "--launcher", str(launcher), "--levels", "node"]
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "bn[0001-0002]"}
    args += ["--out-dir", str(tmp_path / "record")]
    return CliRunner().invoke(main, ["--config", os.devnull, *args], env=env)


def _strict_json(path: Path) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{path} holds {constant}: not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("busbw", ["nan", "inf", "1e309", "0", "-nan", "\u0663\u0663\u0668"])
def test_a_busbw_that_is_no_measurement_fails_the_run(tmp_path: Path, busbw: str) -> None:
    """Every node's busbw nan (or inf, 0, Arabic-Indic digits) was judged "No findings"."""
    lines = []
    for line in _capture():
        words = line.split()
        if len(words) == 13 and words[0].isascii() and words[0].isdigit():
            words[7] = words[11] = busbw
            line = "  ".join(words)
        lines.append(line)
    result = _bench_with(tmp_path, lines)
    assert result.exit_code == Exit.COLLECT, result.output
    assert "every run failed" in result.stderr and "No findings" not in result.stdout
    record = _strict_json(tmp_path / "record" / "bench.json")
    assert isinstance(record, dict) and all(r["busbw"] is None for r in record["results"])


def test_output_cut_mid_table_is_a_failed_run(tmp_path: Path) -> None:
    """Exit 0, the table cut after 4 GiB of an 8 GiB sweep: no measurement of the link."""
    lines = _capture()
    cut = next(i for i, line in enumerate(lines) if line.lstrip().startswith("8589934592"))
    result = _bench_with(tmp_path, lines[:cut])
    assert result.exit_code == Exit.COLLECT, result.output
    assert "output ends before the largest size (4294967296 of 8589934592 B)" in result.stdout


@pytest.mark.parametrize("nodes", ["", " "])
def test_an_empty_bench_node_list_is_refused_not_the_whole_allocation(nodes: str) -> None:
    result = invoke(["bench", "--plan", "--sim", BENCH_SIM, "--nodes", nodes])
    assert "--nodes: empty" in assert_refused(result, Exit.USAGE)


@pytest.mark.parametrize(
    ("levels", "said"),
    [
        ("island", "island not in this fabric; its levels are node, leaf, spine-1\n"),
        ("leaf,spine-2", "spine-2 not in this fabric; its levels are node, leaf, spine-1\n"),
        ("leaf,", "an empty level name in 'leaf,'"),
    ],
)
def test_bench_levels_the_fabric_lacks_are_named_with_those_it_has(levels: str, said: str) -> None:
    """One island: no pair spans the island or fabric level, which the error listed."""
    result = invoke(["bench", "--plan", "--sim", "nodes=8,su=4,tiers=2", "--levels", levels])
    assert said in assert_refused(result, Exit.USAGE)


@pytest.mark.parametrize("sizes", ["3_3_8", "\uff11\uff16", "\u0667"])
def test_block_sizes_in_odd_digits_are_refused(sizes: str) -> None:
    """``int()`` read 3_3_8 as 338 and full-width digits as numbers."""
    result = invoke(["generate", "--sim", TINY, "--format", "block", "--block-sizes", sizes])
    assert "expected comma-separated integers" in assert_refused(result, Exit.USAGE)


@pytest.mark.parametrize("duration", ["\u0667d", "\uff17d"])
def test_a_keep_missing_in_odd_digits_is_refused(duration: str) -> None:
    result = invoke(["generate", "--sim", TINY, "--keep-missing", duration])
    assert "must be a duration like 7d" in assert_refused(result, Exit.USAGE)


@pytest.mark.parametrize("char", ["\ufffe", "\uffff", "\x01"])
@pytest.mark.parametrize("fmt", ["svg", "html"])
def test_xml_invalid_characters_in_a_description_leave_the_picture_valid(
    tmp_path: Path, char: str, fmt: str
) -> None:
    import xml.etree.ElementTree as ET

    from topograph_slurm.sources import sim

    text = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=8,su=8,rails=2"))
    dump = tmp_path / "fabric.txt"
    dump.write_text(text.replace('"gpu0002 mlx5_1"', f'"gpu{char}0002 mlx5_1"'))
    picture = tmp_path / f"fabric.{fmt}"
    result = invoke(["draw", "--ibnetdiscover", str(dump), "-o", str(picture)])
    assert result.exit_code == Exit.OK, result.output
    drawn = picture.read_text()
    escaped = f"\\u{ord(char):04x}" if ord(char) > 0xFF else f"\\x{ord(char):02x}"
    assert char not in drawn and escaped in drawn
    if fmt == "svg":
        ET.fromstring(drawn)


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["generate", "--nope"], "generate --help"),
        (["generate", "--max-tiers", "x"], "generate --help"),
        (["generate", "--rewrite", "no-arrow"], "generate --help"),
        (["bogus"], "main --help"),
        (["--verbose=3"], "main --help"),
        (["collect"], "collect --help"),
    ],
)
def test_a_usage_error_is_one_line_with_the_help_hint(args: list[str], hint: str) -> None:
    line = assert_refused(invoke(args), Exit.USAGE)
    assert line.rstrip().endswith(f"(see 'main {hint.removeprefix('main ')}')")


def test_help_is_unchanged_and_exits_0() -> None:
    result = invoke(["generate", "--help"])
    assert result.exit_code == 0 and result.stdout.startswith("Usage: main generate [OPTIONS]")
    assert "--format [tree|block|yaml]" in result.stdout and result.stderr == ""


def test_an_error_message_is_one_line_even_with_newlines_in_the_value() -> None:
    line = assert_refused(invoke(["generate", "--format", "a\nb\rc\u2028d"]), Exit.USAGE)
    assert "'a\\nb\\rc\\u2028d'" in line


@pytest.mark.parametrize("target", ["out/", "out/.", "/"])
def test_a_directory_as_the_output_is_refused_before_anything_is_written(
    tmp_path: Path, target: str
) -> None:
    """Issue 24: ``-o /etc/slurm/`` wrote a file named /etc/slurm beside the directory (or
    failed on it every hour); it is generate's own rule, reused by ``units``."""
    args = ["generate", "--sim", TINY, "--slurm-nodes", "all", "--slurm-version", "24.11"]
    output = target if target == "/" else f"{tmp_path}/{target}"  # Path drops the "/"
    report = tmp_path / "report.txt"
    line = assert_refused(invoke([*args, "-o", output, "--report", str(report)]), Exit.USAGE)
    assert "'--output': must name a file, not a directory" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("planted", ["directory", "dangling link"])
def test_an_unwritable_rejected_file_still_restores_the_previous_one(
    tmp_path: Path, planted: str
) -> None:
    """Issue 24: a refused reconfigure whose PATH.rejected cannot be written (a directory, a
    link into a shared directory) still puts the previous file back first: exit 10."""
    from tests.support.scontrol import Answer, ReplayScontrol

    refused = Answer(stderr="slurm_reconfigure error: Unspecified error\n", code=1)
    scontrol = ReplayScontrol(tmp_path / "bin", {"show config": Answer(), "reconfigure": refused})
    out, rejected = tmp_path / "topology.conf", tmp_path / "topology.conf.rejected"
    out.write_text(OLD)
    if planted == "directory":
        rejected.mkdir()
    else:
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        (shared / "x").symlink_to(tmp_path / "elsewhere")
        rejected.symlink_to(shared / "x")
    config = tmp_path / "config.yaml"
    config.write_text(f"scontrol: {scontrol.path}\nslurm_nodes: all\nslurm_version: '24.11'\n")
    args = ["-q", "generate", "--sim", TINY, "-o", str(out), "--reconfigure", "--force"]
    line = assert_refused(invoke(args, str(config)), Exit.APPLY, out)
    assert "the previous file is restored, the candidate not kept (" in line
    assert not (tmp_path / "elsewhere").exists()


def test_no_topology_yaml_is_a_multiple_of_4096_bytes_for_an_affected_release() -> None:
    """Issue 24: slurmctld 25.05.0-25.11.5 reads past the end of such a file and dies."""
    from tests.unit.test_topology_yaml import ENV, _block_multiple_topologies
    from topograph_slurm.model.slurm_version import SlurmVersion
    from topograph_slurm.render.topology_yaml import render_topology_yaml

    text = render_topology_yaml(ENV, _block_multiple_topologies(), "ib", SlurmVersion(25, 11))
    assert len(text.encode()) % 4096 != 0


# --------------------------------------------------------------------------- fuzz

#: every character class that has broken a CLI somewhere: controls, separators, quotes,
#: hostlist and format syntax, non-ASCII, lone surrogates (argv that was not UTF-8)
NASTY = st.text(
    st.one_of(
        st.sampled_from([*"\n\r\t\x00\x1b\x0b\x85\u2028 =#,[]{}-!&^@*%\\'\"/:.", "\udcff"]),
        st.characters(codec="utf-8"),
        st.sampled_from(string.ascii_letters + string.digits),
    ),
    max_size=40,
) | st.sampled_from(["", "-", "0", "-1", "nan", "inf", "1e999", "9" * 5000, "n[1-99999999]"])

#: value flags of `generate`, except the -o target; path flags only get names inside the
#: scratch directory
VALUE_FLAGS = [
    "--sim", "--node-name-map", "--rewrite", "--hcas", "--slurm-nodes", "--format",
    "--shrink-limit", "--max-tiers", "--slurm-version", "--block-sizes",
    "--templates", "--block-source", "--nvlink-unhealthy", "--block-name-pattern", "--layout",
    "--yaml-default", "--ufm-timeout", "--ibnetdiscover", "--snapshot",
]  # fmt: skip
PATH_FLAGS = {"--node-name-map", "--templates", "--layout", "--ibnetdiscover", "--snapshot"}
SAFE_NAME = st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1).filter(
    lambda name: name not in (".", "..")
)
#: A local run stays quick; scripts/test sets FUZZ_EXAMPLES=1000 under CI=true to dig deeper
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh working directory with a guarded -o target (hypothesis and tmp_path disagree
    about scope)."""
    with tempfile.TemporaryDirectory() as directory:
        cwd = os.getcwd()
        os.chdir(directory)
        try:
            target = Path(directory, "topology.conf")
            target.write_text(OLD)
            yield target
        finally:
            os.chdir(cwd)


@st.composite
def flag_values(draw: st.DrawFn) -> list[str]:
    args = []
    for flag in draw(st.lists(st.sampled_from(VALUE_FLAGS), min_size=1, max_size=3)):
        args += [flag, draw(SAFE_NAME if flag in PATH_FLAGS else NASTY)]
    return args


@FUZZ
@given(flag_values())
def test_fuzz_flag_values(args: list[str]) -> None:
    with scratch() as target:
        result = invoke(["generate", "--sim", TINY, "-o", str(target), *args])
        assert_clean(result, target)


YAML_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | NASTY
YAML_VALUE = st.recursive(
    YAML_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NASTY, inner, max_size=3)
)
KEYS = [
    "format", "report_format", "max_tiers", "shrink_limit", "lock_timeout", "slurm_version",
    "hcas", "rewrites", "slurm_nodes", "block_sizes", "block_source", "nvlink_unhealthy",
    "block_name_pattern", "yaml_names", "partitions", "yaml_default", "ibnetdiscover_command",
    "ufm_timeout", "filter", "node_name_map", "layout", "templates",
]  # fmt: skip
#: written as YAML text, so anchors, aliases, tags and broken syntax come along
YAML_SNIPPETS = st.sampled_from(
    [
        "a: &x [*x]\n",
        "rewrites: &r [{pattern: x, replace: y}, *r]\n",
        "filter: &f {partitions: *f}\n",
        "format: !!python/object:os.system ls\n",
        "? [a, b]\n: c\n",
        "max_tiers: 0x10\n",
        "block_sizes: [" * 200 + "]" * 200 + "\n",
        "slurm_version: 2024-11-01\n",
        "max_tiers: " + "9" * 5000 + "\n",
        "\t\x00\n",
    ]
)


@st.composite
def config_texts(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["mapping", "snippet", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "snippet":
        return draw(YAML_SNIPPETS).encode()
    keys = st.sampled_from(KEYS) | NASTY
    data = draw(st.dictionaries(keys, YAML_VALUE, max_size=4))
    for key in set(data) & {"node_name_map", "layout", "templates"}:
        data[key] = draw(SAFE_NAME)  # never a path outside the scratch directory
    if isinstance(data.get("filter"), dict):
        data.pop("filter")  # read only with --filter-dir, which is not given
    return yaml.safe_dump(data, allow_unicode=True).encode("utf-8", "surrogateescape")


@FUZZ
@given(config_texts())
def test_fuzz_config_files(text: bytes) -> None:
    with scratch() as target:
        Path("config.yaml").write_bytes(text)
        result = invoke(["generate", "--sim", TINY, "-o", str(target)], "config.yaml")
        assert_clean(result, target)


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | NASTY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NASTY, inner, max_size=3),
)
ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "node": st.sampled_from(["gpu0001", "a b", "", "x" * 65]) | NASTY,
        "command": st.sampled_from(["nvidia-smi-q", "nvidia-smi-topo", "x"]) | NASTY,
        "exit_code": st.sampled_from([0, 1, None, "0", True]),
        "file": st.sampled_from(["nodes/gpu0001/nvidia-smi-q.txt", "../../etc/passwd", "/"])
        | NASTY,
        "error": JSON_VALUE,
        "stderr_tail": JSON_VALUE,
        "timed_out": JSON_VALUE,
    },
)


@st.composite
def manifests(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["manifest", "json", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(JSON_VALUE)).encode()
    data: dict[str, object] = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION}
    data["results"] = draw(st.lists(ENTRY, max_size=4) | JSON_VALUE)
    if draw(st.booleans()):
        data["fabric"] = draw(ENTRY | JSON_VALUE)
    return json.dumps(data).encode()


@FUZZ
@given(manifests(), st.sampled_from(["block", "tree", "yaml"]))
def test_fuzz_snapshot_manifests(text: bytes, fmt: str) -> None:
    with scratch() as target:
        Path("snap/nodes/gpu0001").mkdir(parents=True)
        Path("snap/nodes/gpu0001/nvidia-smi-q.txt").write_text("garbage\n")
        Path("snap/manifest.json").write_bytes(text)
        args = ["generate", "--snapshot", "snap", "--format", fmt, "--slurm-version", "25.05"]
        assert_clean(invoke([*args, "-o", str(target)]), target)


BLOCK_NAME = st.sampled_from(["nvl-1", "r01"]) | NASTY
HOSTLIST = st.sampled_from(["gpu[0001-0004]", "gpu[0005-0008]", "gpu[1-99999999]", ""]) | NASTY


@st.composite
def layouts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["racks", "conf", "text"]))
    if kind == "text":
        return draw(NASTY)
    racks = draw(st.lists(st.tuples(BLOCK_NAME, HOSTLIST), max_size=4))
    if kind == "conf":
        return "".join(f"BlockName={name} Nodes={nodes}\n" for name, nodes in racks)
    return yaml.safe_dump([{"block": name, "nodes": nodes} for name, nodes in racks])


@pytest.fixture(scope="module")
def fuzz_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_snapshot(tmp_path_factory.mktemp("fuzz") / "snap")


@FUZZ
@given(text=layouts())
def test_fuzz_layout_files(fuzz_snapshot: Path, text: str) -> None:
    with scratch() as target:
        Path("layout").write_text(text, encoding="utf-8", errors="surrogateescape")
        args = ["generate", "--snapshot", str(fuzz_snapshot), "--format", "block"]
        args += ["--slurm-version", "25.05", "--layout", "layout", "-o", str(target)]
        assert_clean(invoke(args), target)


@FUZZ
@given(st.lists(st.tuples(NASTY, NASTY), max_size=4), st.binary(max_size=50))
def test_fuzz_node_name_maps(lines: list[tuple[str, str]], tail: bytes) -> None:
    with scratch() as target:
        text = "".join(f'{guid} "{name}"\n' for guid, name in lines)
        Path("map").write_bytes(text.encode("utf-8", "surrogateescape") + tail)
        result = invoke(["generate", "--sim", TINY, "--node-name-map", "map", "-o", str(target)])
        assert_clean(result, target)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["explain", "--sim", "demo", "--nodes", "gpu[0001-0002]", "--tp", "１６"], "--tp"),
        (["explain", "--sim", "demo", "--nodes", "gpu[0001-0002]", "--tp", "1_6"], "--tp"),
        (
            ["explain", "--sim", "demo", "--nodes", "gpu0001", "--gpus-per-node", "٨"],
            "--gpus-per-node",
        ),
        (["bench", "--plan", "--sim", "demo", "--max-pairs", "1_0"], "--max-pairs"),
        (["bench", "--plan", "--sim", "demo", "--slow-fraction", "０.５"], "--slow-fraction"),
        (["bench", "--plan", "--sim", "demo", "--slow-fraction", "0_5"], "--slow-fraction"),
        (["generate", "--sim", "demo", "-o", "t", "--shrink-limit", "０.５"], "--shrink-limit"),
        (["generate", "--sim", "demo", "-o", "t.conf", "--ufm-timeout", "3_0"], "--ufm-timeout"),
        (["generate", "--sim", "demo", "-o", "t.conf", "--ufm-deadline", "inf"], "--ufm-deadline"),
    ],
)
def test_option_numbers_are_ascii_digits_only(args: list[str], option: str) -> None:
    """Python's int() and float() read full-width digits, other scripts' digits and 1_0; an
    option value written so is a usage error naming the option, not a size."""
    result = invoke(args)
    assert result.exit_code == Exit.USAGE, result.output
    assert f"Invalid value for '{option}'" in result.stderr
    assert result.stdout == ""


# --------------------------------------------------------------------------- names in gres.conf

GRES_CAPTURE = (
    Path(__file__).parents[1] / "fixtures/real/nvidia-smi-topo/h100-8gpu-8ib-5eth-13nic-dgx.txt"
)


@pytest.mark.parametrize(
    "name",
    [*HOSTILE_NAMES.values(), "gpu[1-2],$(reboot)", "gpu\u202e1", "a;b"],
    ids=[*HOSTILE_NAMES, "command in a hostlist", "rtl override", "semicolon"],
)
def test_a_hostile_gres_node_name_is_refused_before_anything_is_written(
    tmp_path: Path, name: str
) -> None:
    """gres --nodes: every expanded name passes the Slurm name rule; slurmd reads gres.conf on
    every node, so a forged line would stop them all."""
    target = tmp_path / "gres.conf"
    target.write_text(OLD)
    result = invoke(
        ["gres", "--topo-matrix", str(GRES_CAPTURE), "--nodes", name, "-o", str(target)]
    )
    line = assert_refused(result, Exit.USAGE, target)
    assert "--nodes" in line and "\x1b" not in line


# --------------------------------------------------------------------------- names from Slurm


@pytest.mark.parametrize("name", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
def test_a_hostile_node_name_from_slurm_stops_occupancy_before_any_write(
    tmp_path: Path, name: str
) -> None:
    """occupancy prints Slurm's names and writes them into the metrics: a name outside the
    Slurm name rule (an escape that clears the screen, a newline) is bad input, exit 3, and
    the --metrics file is not written."""
    from tests.unit.test_occupancy import node, nodes
    from tests.unit.test_occupancy import run as occupancy

    metrics = tmp_path / "occupancy.prom"
    result = occupancy(
        tmp_path, "--metrics", str(metrics), node_list=[*nodes(), node(13) | {"name": name}]
    )
    line = assert_refused(result, Exit.INPUT)
    assert "invalid node name" in line and "\x1b" not in line
    assert not metrics.exists() and result.stdout == ""


# --------------------------------------------------------------------------- round 3: pools


POOLS_SIM = "nodes=16,gpus=8,rails=2,su=8"
DECODE_ONE = '{"name": "d", "role": "decode", "tp": 8, "nodes": ["gpu0001"]}'
BIG = "9" * 5000


def pools_file(prefill_extra: str = "", top_extra: str = "") -> str:
    prefill = '{"name": "p", "role": "prefill", "tp": 8, "nodes": ["gpu0002"]' + prefill_extra
    return '{"instances": [' + DECODE_ONE + ", " + prefill + "}]" + top_extra + "}"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (pools_file(', "pairs": 5'), "pairs is a list of instance names"),
        (pools_file(', "pairs": [{}]'), "pairs is a list of instance names"),
        (pools_file(', "pairs": "d"'), "pairs is a list of instance names"),
        (pools_file(top_extra=', "kv_paths": "x"'), "kv_paths is a list"),
        (pools_file(top_extra=', "kv_paths": [{"prefill": 1}]'), "kv_paths is a list"),
        (pools_file(top_extra=', "kv_paths": [5]'), "kv_paths is a list"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            '{"instances": 1, "x": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}",
            "nested too deeply",
        ),
        (
            pools_file().replace('"tp": 8, "nodes": ["gpu0002"]', f'"tp": {BIG}, "nodes": ["x"]'),
            "not JSON",
        ),
        (pools_file(', "gpus": [0, 1e400]'), "gpus is a non-empty list"),
    ],
    ids=[
        "pairs-int",
        "pairs-object",
        "pairs-string",
        "kv-string",
        "kv-field",
        "kv-int",
        "nested-lists",
        "nested-objects",
        "tp-5000-digits",
        "gpus-inf",
    ],
)
def test_a_hostile_pools_file_is_one_input_error(
    tmp_path: Path, content: str, fragment: str
) -> None:
    """Each once crashed explain --pools (exit 70) or was silently ignored."""
    path = tmp_path / "pools.json"
    path.write_text(content)
    line = assert_refused(invoke(["explain", "--sim", POOLS_SIM, "--pools", str(path)]), Exit.INPUT)
    assert fragment in line and len(line) < 400, line


@pytest.mark.parametrize(
    "args",
    [
        ["--prefill", f"4x{BIG}", "--decode", "1x8"],
        ["--prefill", f"{BIG}x8", "--decode", "1x8"],
        ["--prefill", "8", "--decode", "8", "--ratio", f"{BIG}:1"],
    ],
    ids=["tp", "count", "ratio"],
)
def test_a_huge_pools_size_is_one_short_usage_error(args: list[str]) -> None:
    result = invoke(["pools", "--sim", POOLS_SIM, "--nodes", "gpu[0001-0016]", *args])
    line = assert_refused(result, Exit.USAGE)
    assert len(line) < 400, line


def test_an_error_line_quotes_a_long_value_capped() -> None:
    """A 5000-digit value once made a 5,103-character error line."""
    args = ["pools", "--sim", POOLS_SIM, "--nodes", "gpu0001", "--prefill", f"x{BIG}"]
    line = assert_refused(invoke([*args, "--decode", "1x8"]), Exit.USAGE)
    assert len(line) < 400 and "[5003 characters]" in line, line


def every_command(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and subcommand path, enumerated from the CLI itself."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))


def test_no_help_prints_a_bound_of_none() -> None:
    """An unbounded number option once printed ``[x<=None]`` on 59 help lines."""
    commands = list(every_command(main))
    assert len(commands) > 15
    for path in commands:
        result = invoke([*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "<=None" not in result.stdout and ">=None" not in result.stdout, path
