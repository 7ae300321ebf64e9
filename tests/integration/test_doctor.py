"""``doctor`` against real slurmctld: the test cluster configured right reports every check
ok (run live on the controller, as a site runs it); faults planted live, and planted on a
state saved from that controller, are each named; the saved state is read on the host,
where no scontrol is on PATH.

The controller runs the tool as installed (``ClusterSpec.tool``); its topology.conf comes
from the tool's own ``generate --reconfigure`` of a simulated fabric whose hosts are the
cluster's nodes, the job-record hooks are ``#!/bin/sh`` scripts running ``topograph-slurm
record …``, the hourly run is a cron.d file and the last run's metrics are that generate's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from harness import TOOL_COMMAND, Cluster, ClusterSpec, NodeSpec

from tests.support.live_examples import assert_page_shows
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

pytestmark = pytest.mark.integration

NODES = [f"gpu{i:04d}" for i in range(1, 5)]
CONFIG_PATH = "/etc/slurm/topograph.yaml"
METRICS = "/var/lib/prometheus/node-exporter/topograph_slurm.prom"
RECORDS = "/var/lib/topograph-slurm/records"
CONFIG = f"""\
sim: nodes=4,rails=1,su=2,tiers=2
slurm_nodes: gpu[0001-0004]
slurm_version: "24.11"
output: /etc/slurm/topology.conf
metrics: {METRICS}
record_dir: {RECORDS}
"""
HOOKS = {
    "PrologSlurmctld": ("prolog_slurmctld.sh", "start"),
    "Prolog": ("prolog.sh", "node-start"),
    "TaskProlog": ("task_prolog.sh", "task"),
    "Epilog": ("epilog.sh", "node-end"),
}
CRON = (
    "17 * * * * root /usr/local/bin/topograph-slurm --quiet --config "
    f"{CONFIG_PATH} generate --metrics {METRICS}\n"
)
#: the saved state: the files doctor reads, at their paths (modes and owners kept)
SAVED = ["etc/slurm", "etc/cron.d", "var/lib/topograph-slurm", "var/lib/prometheus"]


def _script(sub: str) -> str:
    return f"#!/bin/sh\nexec {TOOL_COMMAND} --config {CONFIG_PATH} record {sub}\n"


@pytest.fixture(scope="session", params=["24.11"])
def slurm_version(request: pytest.FixtureRequest) -> str:
    """Doctor's live wiring on 24.11, the release its release-bound checks (topology/flat
    refused, a reconfigure during a DeferBatch prolog) are about; what differs on 26.05 is
    unit-tested, and the hooks' checks run live on both (test_hooks.py)."""
    return str(request.param)


@pytest.fixture(scope="module")
def cluster(make_module_cluster: Any) -> Cluster:
    extra = "TopologyParam=SwitchAsNodeRank\nPrologFlags=Alloc\n"
    extra += "".join(f"{key}=/etc/slurm/{name}\n" for key, (name, _) in HOOKS.items())
    files: dict[str, str | bytes] = {name: _script(sub) for name, sub in HOOKS.values()}
    files["topograph.yaml"] = CONFIG
    cluster: Cluster = make_module_cluster(
        ClusterSpec(
            nodes=[NodeSpec(node, 4, 0) for node in NODES],
            slurmctld_daemon=True,
            topology_plugin="topology/tree",
            topology_conf="SwitchName=s1 Nodes=gpu[0001-0004]\n",
            slurm_conf_extra=extra,
            extra_files=files,
            tool=True,
        )
    )
    dirs = f"{RECORDS} /var/lib/prometheus/node-exporter /etc/cron.d"
    cluster.exec(f"install -d -m 0755 {dirs}").check()
    cluster.put_file(None, "/etc/cron.d/topograph-slurm", CRON)
    run = f"{TOOL_COMMAND} --config {CONFIG_PATH} generate --reconfigure"
    cluster.exec(run).check("generate --reconfigure")
    return cluster


def _live(cluster: Cluster) -> tuple[int, dict[str, Any]]:
    res = cluster.exec([TOOL_COMMAND, "--config", CONFIG_PATH, "doctor", "--json"])
    return res.rc, json.loads(res.stdout)


def _terminal(cluster: Cluster, line: str) -> str:
    """A docs line run on the controller as a terminal shows it: stdout and stderr as one."""
    return cluster.exec(f"{{ {line}\n}} 2>&1").stdout


def _statuses(data: dict[str, Any]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in data["checks"]}


def _not_ok(data: dict[str, Any]) -> dict[str, str]:
    return {name: status for name, status in _statuses(data).items() if status != "ok"}


def test_configured_right_is_all_ok_and_live_faults_are_named(cluster: Cluster) -> None:
    code, data = _live(cluster)
    assert _not_ok(data) == {}, json.dumps(data, indent=1)
    assert code == 0 and data["slurm_release"].startswith("24.11")
    assert _statuses(data)["hook-Epilog"] == "ok" and _statuses(data)["topology-current"] == "ok"

    # the tool on two compute nodes, through srun (one step per node), is this one
    args = [TOOL_COMMAND, "--config", CONFIG_PATH, "doctor", "--json", "--nodes", "gpu[0001-0002]"]
    res = cluster.exec(args)
    versions = {c["name"]: c for c in json.loads(res.stdout)["checks"]}["node-versions"]
    assert (res.rc, versions["status"]) == (0, "ok"), res.stdout + res.stderr
    assert versions["message"].startswith("2 node(s) run topograph-slurm ")
    assert_page_shows("docs/doctor.md", 1, lambda line: _terminal(cluster, line))

    # planted live: a hook that is not executable, a record root anyone can write
    cluster.exec(["chmod", "0644", "/etc/slurm/epilog.sh"]).check()
    cluster.exec(["chmod", "0777", RECORDS]).check()
    try:
        code, data = _live(cluster)
        assert code == Exit.DIFFERS
        assert _not_ok(data) == {"hook-Epilog": "fail", "record-dir": "fail"}
        fixes = {c["name"]: c["fix"] for c in data["checks"]}
        assert fixes["hook-Epilog"] == "chmod 0755 /etc/slurm/epilog.sh"
        assert fixes["record-dir"] == f"chmod 0755 {RECORDS}"
        assert_page_shows("docs/doctor.md", 2, lambda line: _terminal(cluster, line))
        assert_page_shows("docs/doctor.md", 3, lambda line: _terminal(cluster, line))
    finally:
        cluster.exec(["chmod", "0755", "/etc/slurm/epilog.sh", RECORDS]).check()


def _save(cluster: Cluster, state: Path) -> None:
    """What `slurm save` would write: scontrol show config and the files, modes kept."""
    state.mkdir()
    show = cluster.exec(["scontrol", "show", "config"]).check().stdout
    (state / "scontrol-show-config.txt").write_text(show)
    cluster.exec(["tar", "-C", "/", "-cpf", "/tmp/state.tar", *SAVED]).check("tar")
    data = cluster.read_file("/tmp/state.tar")
    # tar(1), not tarfile: extractall's filter= is missing from Debian 12's Python 3.11.2
    subprocess.run(["tar", "-C", str(state), "-xpf", "-"], input=data, check=True)


def _edit(state: Path, path: str, old: str, new: str) -> None:
    file = state / path
    text = file.read_text()
    assert old in text, (path, old)
    file.write_text(text.replace(old, new))


SHOW = "scontrol-show-config.txt"
#: (name, how to plant it on a copy of the saved state, the check, its status)
PLANTED: list[tuple[str, Any, str, str]] = [
    (
        "no tree plugin",
        lambda s: (
            _edit(s, SHOW, "topology/tree", "topology/default"),
            _edit(s, "etc/slurm/slurm.conf", "topology/tree", "topology/default"),
        ),
        "topology-plugin",
        "fail",
    ),
    (
        "topology/flat in slurm.conf on 24.11",
        lambda s: _edit(s, "etc/slurm/slurm.conf", "topology/tree", "topology/flat"),
        "topology-plugin-name",
        "fail",
    ),
    (
        "a topology.yaml beside it",
        lambda s: (s / "etc/slurm/topology.yaml").write_text("- topology: x\n"),
        "topology-plugin",
        "fail",
    ),
    (
        "no SwitchAsNodeRank",
        lambda s: _edit(s, SHOW, "= SwitchAsNodeRank", "= (null)"),
        "topology-param",
        "warn",
    ),
    (
        "a stale topology.conf",
        lambda s: _edit(s, "etc/slurm/topology.conf", "gpu[0001-0002]", "gpu[0001-0003]"),
        "topology-current",
        "fail",
    ),
    (
        "a Prolog without #!",
        lambda s: _edit(s, "etc/slurm/prolog.sh", "#!/bin/sh\n", ""),
        "hook-Prolog",
        "fail",
    ),
    (
        "a TaskProlog that runs no record",
        lambda s: _edit(s, "etc/slurm/task_prolog.sh", "record task", "true"),
        "hook-TaskProlog",
        "warn",
    ),
    (
        "no PrologSlurmctld script",
        lambda s: (s / "etc/slurm/prolog_slurmctld.sh").unlink(),
        "hook-PrologSlurmctld",
        "fail",
    ),
    (
        "PrologFlags without Alloc",
        lambda s: _edit(s, SHOW, "PrologFlags             = Alloc", "PrologFlags = (null)"),
        "prolog-flags",
        "fail",
    ),
    (
        "a world-writable record root",
        lambda s: (s / RECORDS.lstrip("/")).chmod(0o777),
        "record-dir",
        "fail",
    ),
    (
        "no cron entry",
        lambda s: (s / "etc/cron.d/topograph-slurm").unlink(),
        "schedule",
        "warn",
    ),
    (
        "the last run failed",
        lambda s: _edit(s, METRICS.lstrip("/"), "success 1", "success 0"),
        "last-run",
        "fail",
    ),
    (
        "DeferBatch and an hourly --reconfigure",
        lambda s: (
            _edit(s, SHOW, "PrologFlags             = Alloc", "PrologFlags = Alloc,DeferBatch"),
            _edit(s, "etc/cron.d/topograph-slurm", "generate", "generate --reconfigure"),
        ),
        "reconfigure-prolog",
        "warn",
    ),
]


def _doctor_saved(state: Path, config: Path) -> tuple[int, dict[str, Any]]:
    args = ["--config", str(config), "doctor", "--slurm-state", str(state), "--json"]
    result = CliRunner().invoke(main, args, env={"PATH": "/usr/bin:/bin"})
    assert shutil.which("scontrol", path="/usr/bin:/bin") is None
    return result.exit_code, json.loads(result.stdout)


def test_saved_state_without_scontrol_names_each_planted_fault(
    cluster: Cluster, tmp_path: Path
) -> None:
    state, config = tmp_path / "saved", tmp_path / "config.yaml"
    _save(cluster, state)
    config.write_text(CONFIG)
    code, data = _doctor_saved(state, config)
    assert (code, _not_ok(data)) == (0, {}), json.dumps(data, indent=1)
    assert data["source"] == f"saved state {state}"

    for name, plant, check, status in PLANTED:
        copy = tmp_path / name.replace(" ", "-")
        shutil.copytree(state, copy, symlinks=True)
        plant(copy)
        code, data = _doctor_saved(copy, config)
        assert _not_ok(data) == {check: status}, (name, json.dumps(data, indent=1))
        assert code == (Exit.DIFFERS if status == "fail" else Exit.OK), name
