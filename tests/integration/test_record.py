"""`topograph-slurm record` as Slurm's own hooks run it, on 24.11 and 26.05.

Four nodes of two GPUs under two leaves (topology/tree); the tool installed in every container
(``ClusterSpec.tool``), one shared ``/shared`` (the record_dir), ``PrologSlurmctld`` running
``record start`` (gate on: ``record_refuse: [tp-crossing]``) and ``TaskProlog`` running
``record task``. The hook scripts take a broken config or fabric when a flag file says so, so
one cluster per version shows: a job of two steps of several tasks is recorded once and its
tasks see the exports; a job whose TP groups cross leaves is requeued and held, its nodes stay
idle; a broken config or fabric fails neither the job nor its nodes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from harness import Cluster, ClusterSpec, NodeSpec, parse_kv_line

pytestmark = pytest.mark.integration

NODES = [f"node0{i}" for i in range(1, 5)]
TOPOLOGY = (
    "SwitchName=leaf1 Nodes=node[01-02]\n"
    "SwitchName=leaf2 Nodes=node[03-04]\n"
    "SwitchName=spine Switches=leaf[1-2]\n"
)
CONFIG = "record_dir: /shared/records\nrecord_refuse: [tp-crossing]\n"
START = """#!/bin/sh
# PrologSlurmctld: the job's record and the gate (slurmctld, as SlurmUser, once per job start)
config=/etc/slurm/topograph.yaml topology=/etc/slurm/topology.conf
[ -e /shared/broken-config ] && config=/etc/slurm/broken.yaml
[ -e /shared/broken-fabric ] && topology=/shared/no-such-topology.conf
[ -e /shared/no-hold ] && config=/etc/slurm/no-hold.yaml
echo "$SLURM_JOB_ID" >> /shared/starts.log
exec topograph-slurm --config "$config" record start --topology "$topology" 2>>/shared/start.err
"""
TASK = """#!/bin/sh
# TaskProlog: the record's exports into the task (slurmd, as the job's user, every task)
config=/etc/slurm/topograph.yaml
[ -e /shared/broken-config ] && config=/etc/slurm/broken.yaml
exec topograph-slurm --config "$config" record task 2>>/shared/task.err
"""
#: An scontrol whose requeuehold fails (the gate's hold refused), every other command the real one.
NO_HOLD = """#!/bin/sh
[ "$1" = requeuehold ] && { echo "scontrol: error: staged failure" >&2; exit 1; }
exec scontrol "$@"
"""
#: The --tp-size filter's record of TP 4 over two nodes of two GPUs (set as the filter would).
TP4 = "topograph:tp=4,gpn=2,group=2,src=user"
#: Each task prints its TOPOGRAPH_* variables, prefixed with its rank (srun -l).
SHOW = "srun -l -n 4 --ntasks-per-node=2 sh -c 'env | grep ^TOPOGRAPH_ | sort'"


@pytest.fixture(scope="module")
def cluster(make_module_cluster: Callable[..., Cluster]) -> Cluster:
    nodes = [NodeSpec(name, cpus=4, gpus=2) for name in NODES]
    spec = ClusterSpec(
        nodes=nodes,
        topology_plugin="topology/tree",
        topology_conf=TOPOLOGY,
        slurm_conf_extra=(
            "PrologSlurmctld=/etc/slurm/record-start.sh\nTaskProlog=/etc/slurm/record-task.sh\n"
        ),
        extra_files={
            "topograph.yaml": CONFIG,
            "broken.yaml": "record_dir: [\n",
            "no-hold.yaml": f"{CONFIG}scontrol: /etc/slurm/scontrol-no-hold.sh\n",
            "scontrol-no-hold.sh": NO_HOLD,
            "record-start.sh": START,
            "record-task.sh": TASK,
        },
        tool=True,
        shared_dirs=("/shared",),
    )
    return make_module_cluster(spec)


def submit(cluster: Cluster, args: str) -> str:
    """A job submitted held, given the --tp-size record (sbatch has no --admin-comment; the
    job_submit filter sets it before the job starts), then released."""
    job = cluster.sbatch(f"--hold --ntasks-per-node=2 -o /shared/slurm-%j.out {args}")
    for command in (f"scontrol update job={job} AdminComment={TP4}", f"scontrol release {job}"):
        done = cluster.exec(command)
        assert done.rc == 0, done
    return job


def finished(cluster: Cluster, job: str) -> str:
    """The job's end state; its output and the hooks' stderr when it did not complete."""
    state = cluster.wait_job(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=120).state
    if state != "COMPLETED":
        logs = ("slurm-" + job + ".out", "start.err", "task.err")
        print(*(cluster.exec(f"cat /shared/{name}").stdout for name in logs), sep="\n---\n")
    return state


def task_exports(cluster: Cluster, path: str) -> dict[str, dict[str, str]]:
    """Each task's TOPOGRAPH_* variables, by task rank, from a SHOW step's output."""
    found: dict[str, dict[str, str]] = {}
    for line in cluster.read_file(path).decode().splitlines():
        rank, _, variable = line.partition(": ")
        name, _, value = variable.partition("=")
        found.setdefault(rank.strip(), {})[name] = value
    return found


def test_a_job_of_two_steps_is_recorded_once_and_its_tasks_see_the_exports(
    cluster: Cluster,
) -> None:
    script = f"{SHOW} > /shared/exports.txt; srun -n 4 --ntasks-per-node=2 true"
    job = submit(cluster, f'-N 2 -w node01,node02 --gres=gpu:2 --wrap "{script}"')
    assert finished(cluster, job) == "COMPLETED", cluster.exec(f"scontrol show job {job}")
    starts = cluster.read_file("/shared/starts.log").decode().split()
    assert starts.count(job) == 1
    record = json.loads(cluster.read_file(f"/shared/records/job-{job}.json"))
    assert record["part"] == "job" and record["restart_count"] == 0
    assert [n["node"] for n in record["nodes"]] == ["node01", "node02"]
    assert {n["leaf"] for n in record["nodes"]} == {"leaf1"}
    assert record["layout"]["tp"] == 4 and record["layout"]["source"] == "admin-comment"
    assert record["tp_inside"] is True and record["refused"] == ""
    assert len(record["topology_sha256"]) == 64
    exports = task_exports(cluster, "/shared/exports.txt")
    assert sorted(exports) == ["0", "1", "2", "3"], exports
    for variables in exports.values():
        assert variables["TOPOGRAPH_RECORD"] == f"/shared/records/job-{job}.json"
        assert variables["TOPOGRAPH_TP_CROSSINGS"] == "0"
        assert variables["TOPOGRAPH_LEAVES"] == "1"
        assert variables["TOPOGRAPH_LAYOUT"] == "tp=4,pp=1,gpn=2,src=admin-comment"
        assert variables["TOPOGRAPH_FINGERPRINT"] == record["fingerprint"]
        assert variables["TOPOGRAPH_TOPOLOGY_SHA256"] == record["topology_sha256"]
        assert variables["TOPOGRAPH_LEAF"] == "leaf1"  # this node's own, by SLURMD_NODENAME


def wait_shown(
    cluster: Cluster, job: str, done: Callable[[dict[str, str]], bool]
) -> dict[str, str]:
    """``scontrol show job`` of the job once *done* says so (90 s at most)."""
    deadline = time.monotonic() + 90
    while True:
        shown = parse_kv_line(cluster.exec(f"scontrol -o show job {job}").stdout)
        if done(shown):
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(1)


def prolog_failures(cluster: Cluster, job: str) -> list[str]:
    """slurmctld's lines on the job's PrologSlurmctld exiting non-zero (24.11, 26.05: the
    script runner's ``... PrologSlurmctld exit status 11:0`` and the callback's
    ``prolog_slurmctld JobId=N prolog exit status 11:0``)."""
    lines = cluster.slurmctld_log().splitlines()
    return [line for line in lines if f"JobId={job} " in line and "exit status" in line]


def test_the_gate_requeues_and_holds_a_crossing_job_without_draining(cluster: Cluster) -> None:
    """record start requeues and holds the refused job (scontrol requeuehold) and exits 0:
    no failed PrologSlurmctld, so no second requeue by Slurm (which, racing the hold, let
    the job run on 26.05), no node drained (docs/record.md)."""
    job = submit(cluster, "-N 2 -w node01,node03 --gres=gpu:2 --wrap true")
    # "Cleaning" first, while the requeue completes
    shown = wait_shown(cluster, job, lambda s: s.get("Reason") == "job_requeued_in_held_state")
    assert (shown["JobState"], shown["Priority"], shown["Restarts"]) == ("PENDING", "0", "1"), shown
    deadline = time.monotonic() + 30  # the hold can be seen before the log line is flushed
    while f"Requeuing JobId={job}" not in (log := cluster.slurmctld_log()):
        assert time.monotonic() < deadline, log[-3000:]
        time.sleep(1)
    record = json.loads(cluster.read_file(f"/shared/records/job-{job}.json"))
    assert record["refused"] == "tp-crossing: 1 of 1 TP groups of 4 GPUs cross out of leaf"
    errors = cluster.read_file("/shared/start.err").decode()
    assert f"job {job} refused: tp-crossing" in errors and "not held" not in errors
    time.sleep(5)  # what a failed prolog's requeue would do comes within seconds
    shown = parse_kv_line(cluster.exec(f"scontrol -o show job {job}").stdout)
    assert (shown["JobState"], shown["Reason"], shown["Restarts"]) == (
        "PENDING",
        "job_requeued_in_held_state",
        "1",
    ), shown
    assert prolog_failures(cluster, job) == []
    states = cluster.node_states()
    assert all(states[node] == "idle" for node in NODES), states
    cluster.exec(f"scancel {job}")


def test_a_refused_job_the_gate_cannot_hold_is_requeued_by_slurm(cluster: Cluster) -> None:
    """requeuehold fails (a staged scontrol): record start exits 11, so Slurm requeues the
    job itself (unheld, retried after its requeue delay); it does not run meanwhile."""
    cluster.exec("touch /shared/no-hold")
    try:
        job = submit(cluster, "-N 2 -w node01,node03 --gres=gpu:2 --wrap true")
        shown = wait_shown(
            cluster, job, lambda s: s.get("JobState") == "PENDING" and s.get("Restarts") == "1"
        )
    finally:
        cluster.exec("rm -f /shared/no-hold")
    assert shown["Reason"] != "job_requeued_in_held_state" and shown["Priority"] != "0", shown
    deadline = time.monotonic() + 30  # the requeue can be seen before the log line is flushed
    while not any("exit status 11:0" in line for line in prolog_failures(cluster, job)):
        assert time.monotonic() < deadline, cluster.slurmctld_log()[-3000:]
        time.sleep(1)
    errors = cluster.read_file("/shared/start.err").decode()
    assert "not held (Slurm requeues it and retries)" in errors and "staged failure" in errors
    assert cluster.exec(f"test -e /shared/slurm-{job}.out").rc != 0  # the batch script never ran
    states = cluster.node_states()
    assert all(states[node] == "idle" for node in NODES), states
    cluster.exec(f"scancel {job}")


@pytest.mark.parametrize("flag", ["broken-config", "broken-fabric"])
def test_a_broken_config_or_fabric_fails_neither_job_nor_node(cluster: Cluster, flag: str) -> None:
    cluster.exec(f"touch /shared/{flag}")
    try:
        out = f"/shared/exports-{flag}.txt"
        job = submit(cluster, f'-N 2 -w node01,node03 --gres=gpu:2 --wrap "{SHOW} > {out}"')
        assert finished(cluster, job) == "COMPLETED", cluster.exec(f"scontrol show job {job}")
    finally:
        cluster.exec(f"rm -f /shared/{flag}")
    states = cluster.node_states()
    assert all(states[node] == "idle" for node in NODES), states
    errors = cluster.read_file("/shared/start.err").decode()
    assert f"job {job}: " in errors
    exports = task_exports(cluster, out)
    assert sorted(exports) == ["0", "1", "2", "3"], exports
    if flag == "broken-config":
        missing = {"TOPOGRAPH_RECORD_MISSING": "1", "TOPOGRAPH_BINDING": "unknown"}
        assert all(v == missing for v in exports.values()), exports
    else:
        record = json.loads(cluster.read_file(f"/shared/records/job-{job}.json"))
        assert [f["kind"] for f in record["findings"]] == ["record-incomplete"]
        assert all(v["TOPOGRAPH_NODES"] == "0" for v in exports.values()), exports
