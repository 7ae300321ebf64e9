"""``doctor``'s checks, each passing and failing, over facts built here; the CLI over a saved
state directory (no scontrol on PATH). ``scontrol show config`` lines as 24.11.5 prints them
(tests/integration/test_doctor.py reads a real one, and plants the faults on it).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from topograph_slurm.analysis.doctor import checks
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.doctor import (
    DOCTOR_FORMAT,
    FAIL,
    OK,
    WARN,
    Currency,
    DoctorFacts,
    FileFacts,
    Wanted,
)
from topograph_slurm.slurm.show_config import parse_show_config

CONFIG = """\
Configuration data as of 2026-12-03T15:49:56
CliFilterPlugins        = cli_filter/lua
Epilog[0]               = /etc/slurm/epilog.sh
JobSubmitPlugins        = lua
PlugStackConfig         = (null)
PrologSlurmctld[0]      = /etc/slurm/prolog_slurmctld.sh
Prolog[0]               = /etc/slurm/prolog.sh
PrologFlags             = Alloc
SlurmUser               = slurm(64030)
SLURM_CONF              = /etc/slurm/slurm.conf
SLURM_VERSION           = 24.11.5
TaskProlog              = /etc/slurm/task_prolog.sh
TopologyParam           = SwitchAsNodeRank
TopologyPlugin          = topology/tree
"""
SO = "/usr/local/lib/topograph-slurm/tpsize.so"
SLURM_CONF = "/etc/slurm/slurm.conf"
WANTED = Wanted(
    format="tree",
    output="/etc/slurm/topology.conf",
    filter_dir="/etc/slurm",
    spank_path=SO,
    record_dir="/var/lib/topograph-slurm/records",
    metrics="/var/lib/prometheus/node-exporter/topograph_slurm.prom",
)
HOOK_FILES = {
    "/etc/slurm/prolog_slurmctld.sh": "start",
    "/etc/slurm/prolog.sh": "node-start",
    "/etc/slurm/task_prolog.sh": "task",
    "/etc/slurm/epilog.sh": "node-end",
}


def _file(path: str, text: str = "", mode: int = 0o644, uid: int = 0) -> FileFacts:
    return FileFacts(path, True, False, mode, uid, text)


def _right() -> DoctorFacts:
    """A controller configured right for the wanted outputs."""
    files = {
        path: _file(path, f"#!/bin/sh\nexec /usr/local/bin/topograph-slurm record {sub}\n", 0o755)
        for path, sub in HOOK_FILES.items()
    }
    files.update(
        {p: _file(p, "x") for p in ("/etc/slurm/topology.conf", "/etc/slurm/job_submit.lua", SO)}
    )
    files["/etc/slurm/cli_filter.lua"] = _file("/etc/slurm/cli_filter.lua", "x")
    files[SLURM_CONF] = _file(SLURM_CONF, "ClusterName=c\nTopologyPlugin=topology/tree\n")
    files["/etc/slurm/plugstack.conf"] = _file("/etc/slurm/plugstack.conf", f"optional {SO}\n")
    files[WANTED.record_dir] = FileFacts(WANTED.record_dir, True, True, 0o755, 0)
    files[checks.CRON] = _file(checks.CRON, "17 * * * * root topograph-slurm generate -o x")
    metrics = WANTED.metrics or ""
    files[metrics] = _file(metrics, "topograph_slurm_success 1\n")
    return DoctorFacts(
        parse_show_config(CONFIG),
        WANTED,
        files,
        topology=Currency([]),
        filters=Currency([]),
        version="1.0",
        node_versions={"gpu01": "1.0"},
    )


def _with(facts: DoctorFacts, **files: FileFacts) -> DoctorFacts:
    return replace(facts, files={**facts.files, **{f.path: f for f in files.values()}})


def _config(facts: DoctorFacts, old: str, new: str) -> DoctorFacts:
    assert old in CONFIG
    return replace(facts, config=parse_show_config(CONFIG.replace(old, new)))


def _status(facts: DoctorFacts) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.fix) for c in checks.run_checks(facts)}


def test_configured_right_is_all_ok() -> None:
    found = checks.run_checks(_right())
    assert [c for c in found if c.status != OK] == []
    assert {c.name for c in found} >= {"hook-Prolog", "hook-Epilog", "record-dir", "spank"}


def _planted() -> list[tuple[str, DoctorFacts, str, str]]:
    """(what, facts, check, status): one fault each."""
    right = _right()
    hook = "/etc/slurm/prolog.sh"
    return [
        (
            "no tree plugin",
            _with(
                _config(right, "topology/tree", "topology/default"),
                c=_file(SLURM_CONF, "TopologyPlugin=topology/default\n"),
            ),
            "topology-plugin",
            FAIL,
        ),
        (
            "a topology.yaml",
            _with(right, y=_file("/etc/slurm/topology.yaml", "- topology: x")),
            "topology-plugin",
            FAIL,
        ),
        (
            "output elsewhere",
            replace(right, wanted=replace(WANTED, output="/tmp/t.conf")),
            "topology-plugin",
            FAIL,
        ),
        (
            "topology/flat on 24.11",
            _with(right, c=_file(SLURM_CONF, "TopologyPlugin=topology/flat # new\n")),
            "topology-plugin-name",
            FAIL,
        ),
        (
            "a change not applied",
            _with(
                right,
                c=_file(
                    SLURM_CONF, "TopologyPlugin=topology/tree\ntopologyplugin=topology/block\n"
                ),
            ),
            "topology-plugin-name",
            WARN,
        ),
        (
            "no SwitchAsNodeRank",
            _config(right, "SwitchAsNodeRank", "(null)"),
            "topology-param",
            WARN,
        ),
        (
            "stale topology",
            replace(right, topology=Currency(["/etc/slurm/topology.conf"])),
            "topology-current",
            FAIL,
        ),
        (
            "no lua plugin",
            _config(right, "JobSubmitPlugins        = lua", "JobSubmitPlugins = (null)"),
            "filters",
            FAIL,
        ),
        (
            "stale filters",
            replace(right, filters=Currency(["/etc/slurm/job_submit.lua"])),
            "filters",
            FAIL,
        ),
        (
            "no plugstack line",
            _with(right, p=_file("/etc/slurm/plugstack.conf", "# none\n")),
            "spank",
            FAIL,
        ),
        (
            "no .so",
            replace(right, files={k: v for k, v in right.files.items() if k != SO}),
            "spank",
            FAIL,
        ),
        (
            "hook not executable",
            _with(right, h=_file(hook, "#!/bin/sh\ntopograph-slurm record node-start\n", 0o644)),
            "hook-Prolog",
            FAIL,
        ),
        (
            "hook without #!",
            _with(right, h=_file(hook, "topograph-slurm record node-start\n", 0o755)),
            "hook-Prolog",
            FAIL,
        ),
        (
            "hook missing",
            _config(right, "/etc/slurm/epilog.sh", "/etc/slurm/gone.sh"),
            "hook-Epilog",
            FAIL,
        ),
        (
            "no Epilog",
            _config(right, "Epilog[0]               = /etc/slurm/epilog.sh\n", ""),
            "hook-Epilog",
            FAIL,
        ),
        (
            "no Alloc",
            _config(right, "PrologFlags             = Alloc", "PrologFlags = (null)"),
            "prolog-flags",
            FAIL,
        ),
        (
            "world-writable records",
            _with(right, r=FileFacts(WANTED.record_dir, True, True, 0o777, 0)),
            "record-dir",
            FAIL,
        ),
        (
            "group-writable records",
            _with(right, r=FileFacts(WANTED.record_dir, True, True, 0o775, 0)),
            "record-dir",
            FAIL,
        ),
        (
            "records owned by a user",
            _with(right, r=FileFacts(WANTED.record_dir, True, True, 0o755, 1000)),
            "record-dir",
            FAIL,
        ),
        (
            "no schedule",
            replace(right, files={k: v for k, v in right.files.items() if k != checks.CRON}),
            "schedule",
            WARN,
        ),
        (
            "last run failed",
            _with(right, m=_file(WANTED.metrics or "", "topograph_slurm_success 0\n")),
            "last-run",
            FAIL,
        ),
        (
            "DeferBatch and an hourly reconfigure",
            _with(
                _config(right, "PrologFlags             = Alloc", "PrologFlags = Alloc,DeferBatch"),
                c=_file(checks.CRON, "17 * * * * root topograph-slurm generate --reconfigure"),
            ),
            "reconfigure-prolog",
            WARN,
        ),
        (
            "node version differs",
            replace(right, node_versions={"gpu01": "0.9"}),
            "node-versions",
            FAIL,
        ),
    ]


@pytest.mark.parametrize(
    ("what", "facts", "name", "status"), _planted(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_each_planted_fault_is_named(what: str, facts: DoctorFacts, name: str, status: str) -> None:
    found = _status(facts)
    assert found[name][0] == status, what
    assert found[name][1], "a fault carries the line that fixes it"
    others = {n: s for n, (s, _) in found.items() if n != name and s != OK}
    assert others == {}, what


def test_deferbatch_on_26_11_is_no_risk() -> None:
    facts = _config(_right(), "PrologFlags             = Alloc", "PrologFlags = Alloc,DeferBatch")
    facts = replace(facts, wanted=replace(WANTED, reconfigure=True))
    assert _status(facts)["reconfigure-prolog"][0] == WARN
    assert _status(_config(facts, "24.11.5", "26.11.0"))["reconfigure-prolog"][0] == OK


def test_yaml_on_24_11_fails() -> None:
    facts = replace(_right(), wanted=replace(WANTED, format="yaml"))
    assert _status(facts)["topology-plugin"][0] == FAIL


# --------------------------------------------------------------------------- saved state, CLI


def _saved(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    (state / "etc/slurm").mkdir(parents=True)
    (state / "scontrol-show-config.txt").write_text(CONFIG)
    for path, sub in HOOK_FILES.items():
        script = state / path.lstrip("/")
        script.write_text(f"#!/bin/sh\nexec topograph-slurm record {sub}\n")
        script.chmod(0o755)
    return state


def test_saved_state_without_scontrol(tmp_path: Path) -> None:
    state = _saved(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"output: /etc/slurm/topology.conf\nrecord_dir: {tmp_path}/records\n")
    env = {"PATH": "/nonexistent"}  # no scontrol anywhere
    args = ["--config", str(config), "doctor", "--slurm-state", str(state), "--json"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == Exit.DIFFERS, result.output  # topology.conf is missing
    data = json.loads(result.stdout)
    assert data["format"] == DOCTOR_FORMAT and data["version"] == 1
    assert data["slurm_release"] == "24.11.5"
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["topology-plugin"]["status"] == FAIL
    assert by_name["topology-plugin"]["message"] == "/etc/slurm/topology.conf does not exist"
    assert by_name["hook-Prolog"]["status"] == OK
    assert data["counts"][FAIL] == sum(c["status"] == FAIL for c in data["checks"])


def test_a_state_dir_without_show_config_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "config.yaml").write_text("{}\n")
    args = ["--config", str(tmp_path / "config.yaml"), "doctor", "--slurm-state"]
    result = CliRunner().invoke(main, [*args, str(tmp_path / "empty")])
    assert result.exit_code == Exit.INPUT, result.output
    assert "scontrol-show-config.txt" in result.stderr


def test_show_config_reads_indexed_hooks_users_and_null() -> None:
    config = parse_show_config(
        CONFIG + "Epilog[1]               = /etc/slurm/epilog2.sh\nResvProlog = (null)\n"
    )
    assert config.programs("Epilog") == ["/etc/slurm/epilog.sh", "/etc/slurm/epilog2.sh"]
    assert config.programs("ResvProlog") == [] and config.get("ResvProlog") is None
    assert config.slurm_user == ("slurm", 64030)
    assert config.conf_dir == "/etc/slurm"
    assert config.flags("PrologFlags") == {"Alloc"}


@pytest.mark.parametrize(
    ("stdout", "error", "said"),
    [
        ("topograph-slurm, version 0.9.0\n", "", "0.9.0"),
        ("", "srun: error: Unable to allocate resources: Invalid node name\n", "unknown (srun: "),
        ("", "", "unknown (no answer)"),
    ],
)
def test_a_nodes_version_line(stdout: str, error: str, said: str) -> None:
    from topograph_slurm.app.doctor import said_version

    assert said_version(stdout, error).startswith(said)


def test_default_and_flat_are_one_plugin_on_26_05() -> None:
    text = CONFIG.replace("topology/tree", "topology/flat").replace("24.11.5", "26.05.5")
    facts = replace(_right(), config=parse_show_config(text))
    facts = _with(facts, c=_file(SLURM_CONF, "TopologyPlugin=topology/default\n"))
    assert _status(facts)["topology-plugin-name"][0] == OK


def test_the_topology_is_current_by_generates_own_rendering(tmp_path: Path) -> None:
    state = _saved(tmp_path)
    conf = state / "etc/slurm/topology.conf"
    config = tmp_path / "config.yaml"
    fabric = 'sim: nodes=4,rails=1,su=2,tiers=2\nslurm_nodes: all\nslurm_version: "24.11"\n'
    config.write_text(fabric + f"output: {conf}\n")
    written = CliRunner().invoke(main, ["--config", str(config), "generate"])
    assert written.exit_code == Exit.OK, written.output
    config.write_text(fabric + f"output: /etc/slurm/topology.conf\nrecord_dir: {tmp_path}\n")
    args = ["--config", str(config), "doctor", "--slurm-state", str(state), "--json"]

    def current() -> str:
        data = json.loads(CliRunner().invoke(main, args).stdout)
        return str({c["name"]: c["status"] for c in data["checks"]}["topology-current"])

    assert current() == OK
    conf.write_text(conf.read_text().replace("\n", "\n\n", 1))
    assert current() == FAIL
