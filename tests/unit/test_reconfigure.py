"""``generate --reconfigure``: Slurm's refusal read from its log, the running topology compared
as a structure, and the restore of the previous file.

The slurmctld log excerpts and ``scontrol`` answers were recorded on the real 24.11.5 and
26.05.5 test cluster (a daemonized slurmctld refusing a broken topology.conf; see
tests/integration/test_reconfigure.py, which runs the whole thing for real).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.scontrol import Answer, ReplayScontrol
from topograph_slurm.cli.main import main
from topograph_slurm.errors import CollectError, Exit, InputError, ReconfigureError
from topograph_slurm.slurm.applied import differences, summary
from topograph_slurm.slurm.reconfigure import (
    apply,
    held,
    parse_log_file,
    reconfigure_reason,
    rejected_path,
)
from topograph_slurm.slurm.release import parse_version
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.slurm.topology import parse_show_topology
from topograph_slurm.sources.layout import parse_topology

# 24.11.5: an unknown key in topology.conf (scontrol reconfigure: exit 1, "Unspecified error")
LOG_2411_UNKNOWN_KEY = """\
[2026-12-01T12:05:51.890] Processing Reconfiguration Request
[2026-12-01T12:05:51.890] Reconfigure signal (SIGHUP) received
[2026-12-01T12:05:51.890] Saving all slurm state
[2026-12-01T12:05:51.890] error: Could not open job state file /var/spool/slurmctld/job_state
[2026-12-01T12:05:51.896] Attempting to reconfigure
[2026-12-01T12:05:51.908] slurmctld version 24.11.5 started on cluster tsc(2684)
[2026-12-01T12:05:51.916] Recovered state of 4 nodes
[2026-12-01T12:05:51.916] error: _parse_next_key: Parsing error at unrecognized key: FooBar
[2026-12-01T12:05:51.916] fatal: something wrong with opening/reading \
/etc/slurm/topology.conf: Invalid argument
[2026-12-01T12:05:51.918] Resuming operation, reconfigure failed.
[2026-12-01T12:05:51.920] Running as primary controller
"""
# 26.05.5: a switch defined twice
LOG_2605_DUPLICATE = """\
[2026-12-01T12:06:29.476] Processing Reconfiguration Request
[2026-12-01T12:06:29.484] Attempting to reconfigure
[2026-12-01T12:06:29.495] slurmctld version 26.05.5 started on cluster tsc(3842)
[2026-12-01T12:06:29.498] Recovered state of 4 nodes
[2026-12-01T12:06:29.499] fatal: Switch (s1) has already been defined
[2026-12-01T12:06:29.500] Resuming operation, reconfigure failed.
"""
# 24.11.5: a node slurmctld does not know is a warning only; the reconfigure succeeds
LOG_2411_ACCEPTED = """\
[2026-12-01T12:05:58.690] Attempting to reconfigure
[2026-12-01T12:05:58.704] error: _find_node_record: lookup failure for node "nodeZZ"
[2026-12-01T12:05:58.704] warning: Invalid hostnames in switch configuration: nodeZZ
[2026-12-01T12:05:58.706] child started successfully
[2026-12-01T12:05:58.707] Relinquishing control to new child
"""
REFUSED_2411 = Answer(stderr="slurm_reconfigure error: Unspecified error\n", code=1)
REFUSED_2605 = Answer(stderr="slurm_reconfigure error:Unspecified error\n", code=1)
OLD = (
    "SwitchName=s1 Nodes=node[01-02]\nSwitchName=s2 Nodes=node[03-04]\n"
    "SwitchName=top Switches=s[1-2]\n"
)
NEW = "SwitchName=s1 Nodes=node[01-04]\n"
# scontrol show topology of OLD (24.11.5 and 26.05.5 print the same)
RUNNING_OLD = """\
SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[01-02]
SwitchName=s2 Level=0 LinkSpeed=1 Nodes=node[03-04]
SwitchName=top Level=1 LinkSpeed=1 Nodes=node[01-04] Switches=s[1-2]
"""
RUNNING_NEW = "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[01-04]\n"


# --------------------------------------------------------------------------- parsers


def test_reason_is_the_fatal_line_and_the_error_before_it() -> None:
    assert reconfigure_reason(LOG_2411_UNKNOWN_KEY) == (
        "Parsing error at unrecognized key: FooBar; something wrong with opening/reading "
        "/etc/slurm/topology.conf: Invalid argument"
    )
    assert reconfigure_reason(LOG_2605_DUPLICATE) == "Switch (s1) has already been defined"


def test_a_successful_attempt_after_a_failed_one_has_no_reason() -> None:
    assert reconfigure_reason(LOG_2411_UNKNOWN_KEY + LOG_2411_ACCEPTED) is None
    assert reconfigure_reason("") is None


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm-wlm 24.11.5\n", "24.11.5"),
        ("slurm-wlm 26.05.5\n", "26.05.5"),
        ("slurm 25.11", "25.11"),
    ],
)
def test_version_lines(text: str, version: str) -> None:
    assert parse_version(text) == version


def test_a_version_line_that_is_not_slurms_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unexpected `scontrol --version` output"):
        parse_version("scontrol: command from another package 1.0")


def test_log_file_from_show_config() -> None:
    text = "SlurmctldHost[0]        = slurmctld\n"
    text += "SlurmctldLogFile        = /var/log/slurm/slurmctld.log\n"
    assert parse_log_file(text) == "/var/log/slurm/slurmctld.log"
    assert parse_log_file("SlurmctldLogFile        = (null)\n") is None


# --------------------------------------------------------------------------- the structure


def test_what_slurm_prints_for_a_written_tree_is_no_difference() -> None:
    assert differences(parse_topology(OLD), parse_show_topology(RUNNING_OLD)) == []


def test_a_moved_node_and_a_missing_switch_are_differences() -> None:
    found = differences(parse_topology(OLD), parse_show_topology(RUNNING_NEW))
    assert found == [
        "leaf s1 runs with node[03-04]",
        "leaf s2 is not running",
        "switch top is not running",
    ]
    assert summary(found * 2).endswith("(and 3 more)")


def test_blocks_compare_by_members_and_sizes() -> None:
    written = parse_topology(
        "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,8\n"
    )
    same = parse_show_topology(
        "BlockName=b1 BlockIndex=0 Nodes=n[1-4] BlockSize=4\n"
        "BlockName=b2 BlockIndex=1 Nodes=n[5-8] BlockSize=4\n"
        "AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-8] BlockSize=8\n"
    )
    assert differences(written, same) == []
    other = parse_show_topology("BlockName=b1 BlockIndex=0 Nodes=n[1-4] BlockSize=4\n")
    assert differences(written, other) == [
        "block b2 is not running",
        "BlockSizes 4 run, 4,8 written",
    ]
    assert (
        differences(written, parse_show_topology(RUNNING_OLD))[0]
        == "a tree topology runs but none was written"
    )


# --------------------------------------------------------------------------- apply


def _write(path: Path, text: str) -> bytes | None:
    """Write *text* as generate would, returning what was there before."""
    with held(path, 5.0, None) as previous:
        path.write_text(text)
    return previous


def _replaced(tmp_path: Path, answers: dict[str, Answer]) -> tuple[ReplayScontrol, Path, bytes]:
    """A replaying scontrol, and topology.conf changed from OLD to NEW (OLD returned)."""
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    path = tmp_path / "topology.conf"
    path.write_text(OLD)
    previous = _write(path, NEW)
    assert previous is not None
    return scontrol, path, previous


def test_unchanged_file_runs_no_scontrol(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(tmp_path / "bin", {})
    path = tmp_path / "topology.conf"
    path.write_text(OLD)
    assert apply(path, OLD.encode(), OLD, Scontrol(str(scontrol.path))) is False
    assert scontrol.calls == []


def test_changed_file_reconfigures_and_checks(tmp_path: Path) -> None:
    answers = {"reconfigure": Answer(), "show topology": Answer(RUNNING_NEW)}
    scontrol, path, previous = _replaced(tmp_path, answers)
    log = tmp_path / "slurmctld.log"
    assert apply(path, previous, NEW, Scontrol(str(scontrol.path), log=str(log))) is True
    assert scontrol.calls == ["reconfigure", "show topology"]
    assert not rejected_path(path).exists()


@pytest.mark.parametrize(
    ("answer", "log", "reason"),
    [
        (REFUSED_2411, LOG_2411_UNKNOWN_KEY, "Parsing error at unrecognized key: FooBar"),
        (REFUSED_2605, LOG_2605_DUPLICATE, "Switch (s1) has already been defined"),
    ],
    ids=["24.11", "26.05"],
)
def test_refused_candidate_is_kept_and_the_old_file_restored(
    tmp_path: Path, answer: Answer, log: str, reason: str
) -> None:
    logfile = tmp_path / "slurmctld.log"
    logfile.write_text("[2026-12-01T11:00:00.000] Running as primary controller\n")
    # slurmctld appends its refusal to the log while scontrol waits
    appended = Answer(answer.stdout, answer.stderr, answer.code, f"cat {tmp_path}/new >> {logfile}")
    (tmp_path / "new").write_text(log)
    scontrol, path, previous = _replaced(tmp_path, {"reconfigure": appended})
    with pytest.raises(ReconfigureError) as raised:
        apply(path, previous, NEW, Scontrol(str(scontrol.path), log=str(logfile)))
    assert reason in str(raised.value) and raised.value.exit_code == Exit.APPLY == 10
    assert path.read_text() == OLD
    assert rejected_path(path).read_text() == NEW
    assert scontrol.calls == ["reconfigure"]


def test_without_a_readable_log_the_reason_is_scontrols(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(
        tmp_path / "bin",
        {"show config": Answer("SlurmctldLogFile        = (null)\n"), "reconfigure": REFUSED_2411},
    )
    path = tmp_path / "topology.conf"
    with pytest.raises(ReconfigureError, match="Unspecified error \\(see the slurmctld log\\)"):
        apply(path, _write(path, NEW), NEW, Scontrol(str(scontrol.path)))
    assert not path.exists() and rejected_path(path).read_text() == NEW  # there was no file


def test_a_different_running_topology_is_rolled_back(tmp_path: Path) -> None:
    answers = {"reconfigure": Answer(), "show topology": Answer(RUNNING_OLD)}
    scontrol, path, previous = _replaced(tmp_path, answers)
    with pytest.raises(ReconfigureError, match="runs something else: leaf s1 runs without"):
        apply(path, previous, NEW, Scontrol(str(scontrol.path), log=str(tmp_path / "no.log")))
    assert path.read_text() == OLD and rejected_path(path).read_text() == NEW
    assert scontrol.calls == ["reconfigure", "show topology", "reconfigure"]


# --------------------------------------------------------------------------- the CLI


def test_reconfigure_needs_an_output_and_no_check(tmp_path: Path) -> None:
    runner = CliRunner()
    alone = runner.invoke(
        main, ["--config", "/dev/null", "generate", "--sim", "demo", "--reconfigure"]
    )
    assert alone.exit_code == Exit.USAGE and "--reconfigure needs -o PATH" in alone.stderr
    out = str(tmp_path / "t.conf")
    check = runner.invoke(
        main,
        [
            "--config",
            "/dev/null",
            "generate",
            "--sim",
            "demo",
            "-o",
            out,
            "--check",
            "--reconfigure",
        ],
    )
    assert check.exit_code == Exit.USAGE and "--check writes nothing" in check.stderr
    config = tmp_path / "cron.yaml"  # a cron job's config, reused for a check
    config.write_text(f"reconfigure: true\nmetrics: {tmp_path / 'm.prom'}\nslurm_nodes: all\n")
    stale = runner.invoke(
        main, ["--config", str(config), "generate", "--sim", "demo", "-o", out, "--check"]
    )
    assert stale.exit_code == Exit.DIFFERS and not (tmp_path / "m.prom").exists()


def test_cli_refusal_is_one_line_and_exit_10(tmp_path: Path) -> None:
    scontrol = ReplayScontrol(
        tmp_path / "bin",
        {"show config": Answer("SlurmctldLogFile        = (null)\n"), "reconfigure": REFUSED_2605},
    )
    config = tmp_path / "config.yaml"
    config.write_text(f"scontrol: {scontrol.path}\nslurm_nodes: all\nslurm_version: '24.11'\n")
    out = tmp_path / "topology.conf"
    args = [
        "-q",
        "--config",
        str(config),
        "generate",
        "--sim",
        "demo",
        "-o",
        str(out),
        "--reconfigure",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == Exit.APPLY
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        f"topograph-slurm: error: slurmctld did not take {out}: {scontrol.path} reconfigure "
        "failed (exit 1): slurm_reconfigure error:Unspecified error (see the slurmctld log)"
    )
    assert not out.exists() and "SwitchName=" in rejected_path(out).read_text()


def test_a_check_that_cannot_run_keeps_what_slurmctld_took(tmp_path: Path) -> None:
    down = Answer(stderr="slurm_load_topo error: Unable to contact slurm controller\n", code=1)
    scontrol, path, previous = _replaced(tmp_path, {"reconfigure": Answer(), "show topology": down})
    with pytest.raises(CollectError, match="reconfigured, but cannot check") as raised:
        apply(path, previous, NEW, Scontrol(str(scontrol.path), log=str(tmp_path / "no.log")))
    assert raised.value.exit_code == Exit.COLLECT
    assert path.read_text() == NEW and not rejected_path(path).exists()


def test_without_scontrol_nothing_is_written(tmp_path: Path) -> None:
    """Issue 24: --reconfigure on a host without scontrol used to write, fail, and remove the
    new file (there was no previous one); now it is refused before anything is written."""
    out, report = tmp_path / "topology.conf", tmp_path / "report.txt"
    args = ["--config", "/dev/null", "generate", "--sim", "demo", "--slurm-nodes", "all"]
    args += ["--slurm-version", "24.11", "-o", str(out), "--report", str(report)]
    result = CliRunner().invoke(main, [*args, "--reconfigure"], env={"PATH": str(tmp_path)})
    assert result.exit_code == Exit.COLLECT, result.output
    assert result.stderr == (
        "topograph-slurm: error: scontrol not found: --reconfigure needs slurm-client; "
        "nothing written\n"
    )
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.parametrize("planted", ["directory", "link"])
def test_an_unwritable_rejected_path_still_restores_first(tmp_path: Path, planted: str) -> None:
    """Issue 24: PATH.rejected a directory (or a link another user could have planted) used to
    stop the restore, leaving the refused candidate where slurmctld reads it (exit 9)."""
    scontrol, path, previous = _replaced(tmp_path, {"reconfigure": REFUSED_2605})
    rejected = rejected_path(path)
    if planted == "directory":
        rejected.mkdir()
    else:
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)  # writable by others, not sticky: a link there is not trusted
        (shared / "x").symlink_to(tmp_path / "elsewhere")
        rejected.symlink_to(shared / "x")
    with pytest.raises(ReconfigureError) as raised:
        apply(path, previous, NEW, Scontrol(str(scontrol.path), log=str(tmp_path / "no.log")))
    assert path.read_text() == OLD
    message = str(raised.value)
    assert raised.value.exit_code == Exit.APPLY
    assert "the previous file is restored, the candidate not kept (" in message
    assert str(rejected) in message and "kept as" not in message
    assert not (tmp_path / "elsewhere").exists()
