"""`topograph-slurm hooks install` on real Slurm (24.11, 26.05): the four record hooks written by
the tool inside every container (``ClusterSpec(tool=True)``: the tool as a site installs it),
slurm.conf naming them. Jobs of alice (uid 2000) run and carry their record and exports; with
the tool broken — a module deleted from its install, a hung scontrol, a config that does not
parse, the binary gone — every job still completes (no requeue) and no node is drained.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from harness import TOOL_COMMAND, Cluster, ClusterSpec, HarnessError, NodeSpec

pytestmark = pytest.mark.integration

NODES = ("node0001", "node0002")
HOOK_DIR = "/etc/slurm"
#: slurmctld will not start while PrologSlurmctld names no file: a placeholder until the
#: install replaces it (it then reports it stale and writes its own).
PLACEHOLDERS = {
    f"topograph-record-{hook}.sh": "#!/bin/sh\nexit 0\n"
    for hook in ("start", "task", "node-start", "node-end")
}
CONFIG = "/etc/slurm/topograph-slurm.yaml"
RECORDS = "/shared/records"
INSTALL = (
    f"{TOOL_COMMAND} --config {CONFIG} hooks install --dir {HOOK_DIR} --record-dir {RECORDS}"
    f" --binary {TOOL_COMMAND} --topology /etc/slurm/topology.conf"
)
SLURM_CONF = (
    f"PrologSlurmctld={HOOK_DIR}/topograph-record-start.sh\n"
    f"TaskProlog={HOOK_DIR}/topograph-record-task.sh\n"
    f"Prolog={HOOK_DIR}/topograph-record-node-start.sh\n"
    f"Epilog={HOOK_DIR}/topograph-record-node-end.sh\n"
    "PrologFlags=Alloc\n"
)
#: Each task says it ran and prints its TOPOGRAPH_* variables, prefixed with its rank (srun -l).
SHOW = "srun -l -n 2 --ntasks-per-node=1 sh -c 'echo RAN=1; env | grep ^TOPOGRAPH_ | sort'"


@pytest.fixture(scope="module")
def cluster(make_module_cluster: Callable[..., Cluster]) -> Cluster:
    spec = ClusterSpec(
        nodes=[NodeSpec(name, cpus=2, gpus=2) for name in NODES],
        tool=True,
        shared_dirs=("/shared",),
        topology_plugin="topology/tree",
        topology_conf="SwitchName=leaf1 Nodes=node[0001-0002]\n",
        slurm_conf_extra=SLURM_CONF,
        extra_files={
            "topograph-slurm.yaml": f"record_dir: {RECORDS}\nscontrol_timeout: 60\n",
            **PLACEHOLDERS,
        },
    )
    started = make_module_cluster(spec)
    started.exec("mkdir -p /shared/out && chmod 1777 /shared/out")
    for node in (None, *NODES):
        done = started.exec(INSTALL, node=node)
        assert done.rc == 0, done
    return started


def everywhere(cluster: Cluster, command: str) -> None:
    for node in (None, *NODES):
        done = cluster.exec(command, node=node)
        assert done.rc == 0, (node, done)


def run_job(cluster: Cluster, name: str, timeout: float = 180) -> tuple[str, dict[str, str]]:
    """A two-node job of alice's that prints its tasks' exports; its id and `scontrol show
    job` once it ended."""
    out = f"/shared/out/{name}.txt"
    done = cluster.exec(
        f"runuser -u alice -- sbatch --parsable -N2 --gres=gpu:2 -o /shared/out/{name}.log "
        f'--wrap "{SHOW} > {out}"'
    )
    assert done.rc == 0, done
    job = done.stdout.strip().split(";")[0]
    state = cluster.wait_job(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=timeout).state
    shown = dict(
        field.split("=", 1)
        for field in cluster.exec(f"scontrol -o show job {job}").stdout.split()
        if "=" in field
    )
    assert state == "COMPLETED", (shown, cluster.slurmctld_log()[-3000:])
    return job, shown


def exports(cluster: Cluster, name: str) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for line in cluster.read_file(f"/shared/out/{name}.txt").decode().splitlines():
        rank, _, variable = line.partition(": ")
        key, _, value = variable.partition("=")
        found.setdefault(rank.strip(), {})[key] = value
    return found


def no_node_drained(cluster: Cluster) -> None:
    states = cluster.node_states()
    assert all(states[node] == "idle" for node in NODES), states


def test_installed_hooks_record_the_job_and_export_to_its_tasks(cluster: Cluster) -> None:
    check = cluster.exec(f"{INSTALL} --check")
    assert check.rc == 0, check
    assert "PrologFlags=Alloc" in cluster.exec(INSTALL).stdout
    job, shown = run_job(cluster, "plain")
    assert shown["Restarts"] == "0"
    record = json.loads(cluster.read_file(f"{RECORDS}/job-{job}.json"))
    assert [node["node"] for node in record["nodes"]] == list(NODES)
    found = exports(cluster, "plain")
    assert sorted(found) == ["0", "1"], found
    for variables in found.values():
        assert variables["TOPOGRAPH_RECORD"] == f"{RECORDS}/job-{job}.json"
        assert variables["TOPOGRAPH_FINGERPRINT"] == record["fingerprint"]
    listing = cluster.exec(
        f"stat -c '%U %a %n' {RECORDS} {RECORDS}/job-{job}.d {RECORDS}/job-{job}.d/tasks"
    )
    assert listing.stdout.split("\n")[:3] == [
        f"root 755 {RECORDS}",
        f"root 755 {RECORDS}/job-{job}.d",
        f"alice 755 {RECORDS}/job-{job}.d/tasks",
    ], listing
    deadline = time.monotonic() + 60
    while True:  # the Epilog runs after the job
        try:
            for node in NODES:
                end = json.loads(cluster.read_file(f"{RECORDS}/job-{job}.d/{node}.end.json"))
                assert end["part"] == "node-end"
            break
        except HarnessError:
            assert time.monotonic() < deadline
            time.sleep(1)
    no_node_drained(cluster)


@pytest.fixture
def broken(cluster: Cluster) -> Iterator[Callable[[str, str], None]]:
    """Break the tool in every container with a command; undo it with another afterwards."""
    undo: list[str] = []

    def breaking(command: str, restore: str) -> None:
        undo.append(restore)
        everywhere(cluster, command)

    yield breaking
    for command in reversed(undo):
        everywhere(cluster, command)


SHIM = "#!/bin/sh\\nexec sleep 600\\n"
BREAKS = {
    "missing-module": (  # wherever the install put the package (a checkout copy, a venv)
        "f=$(find /opt /usr -path '*/topograph_slurm/app/record.py' | head -1) && "
        'test -n "$f" && echo "$f" > /root/record.path && mv "$f" /root/record.py.bak',
        'mv /root/record.py.bak "$(cat /root/record.path)"',
    ),
    "hung-scontrol": (
        f"cp {CONFIG} /root/config.bak && printf '{SHIM}' > /usr/local/bin/hang-scontrol && "
        f"chmod 755 /usr/local/bin/hang-scontrol && "
        f"echo 'scontrol: /usr/local/bin/hang-scontrol' >> {CONFIG}",
        f"cp /root/config.bak {CONFIG}",
    ),
    "bad-config": (
        f"cp {CONFIG} /root/config.bak && echo 'record_dir: [' > {CONFIG}",
        f"cp /root/config.bak {CONFIG}",
    ),
    "no-binary": (
        f"mv {TOOL_COMMAND} /root/topograph-slurm.bak",
        f"mv /root/topograph-slurm.bak {TOOL_COMMAND}",
    ),
}


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_broken_tool_fails_no_job_and_drains_no_node(
    cluster: Cluster, broken: Callable[[str, str], None], how: str
) -> None:
    broken(*BREAKS[how])
    began = time.monotonic()
    job, shown = run_job(cluster, how)
    took = time.monotonic() - began
    assert shown["Restarts"] == "0", shown
    found = exports(cluster, how)
    assert sorted(found) == ["0", "1"], found  # every task ran
    assert not any("TOPOGRAPH_FINGERPRINT" in v for v in found.values()), found  # truly broken
    no_node_drained(cluster)
    log = cluster.slurmctld_log()
    assert f"Requeuing JobId={job}" not in log
    if how == "hung-scontrol":  # record start's own deadline (30 s), not scontrol's 60 s
        assert took < 60, took


def test_a_private_record_is_read_by_the_jobs_tasks_and_no_other_user(
    cluster: Cluster, broken: Callable[[str, str], None]
) -> None:
    """record_private: PrologSlurmctld (SLURM_JOB_UID from slurmctld) grants alice's uid
    read through an ACL; her tasks export the record, another user reads nothing."""
    broken(
        f"cp {CONFIG} /root/config.bak && echo 'record_private: true' >> {CONFIG}",
        f"cp /root/config.bak {CONFIG}",
    )
    job, _ = run_job(cluster, "private")
    record = json.loads(cluster.read_file(f"{RECORDS}/job-{job}.json"))
    found = exports(cluster, "private")
    assert all(v.get("TOPOGRAPH_FINGERPRINT") == record["fingerprint"] for v in found.values())
    modes = cluster.exec(f"stat -c '%a' {RECORDS}/job-{job}.json {RECORDS}/job-{job}.exports")
    assert modes.stdout.split() == ["640", "640"], modes  # the ACL's mask shows as the group's
    other = cluster.exec(f"runuser -u nobody -- cat {RECORDS}/job-{job}.exports")
    assert other.rc != 0, other
    assert cluster.exec(f"runuser -u alice -- cat {RECORDS}/job-{job}.exports").rc == 0


def test_doctor_finds_the_installed_hooks_and_record_root_right(cluster: Cluster) -> None:
    """What `hooks install` wrote is what `doctor` checks for: every hook line points at an
    executable #! script running its record part, and the record root is trusted."""
    done = cluster.exec(f"{TOOL_COMMAND} --config {CONFIG} doctor --json")
    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    wanted = [f"hook-{key}" for key in ("PrologSlurmctld", "TaskProlog", "Prolog", "Epilog")]
    for name in [*wanted, "prolog-flags", "record-dir"]:
        assert checks[name]["status"] == "ok", (name, checks[name])
