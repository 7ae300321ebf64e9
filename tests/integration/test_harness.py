"""The test-cluster harness itself: failures surface as one HarnessError carrying the daemon
log, and nothing it created is left behind (failed start, Ctrl-C, crashed earlier run)."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
import pytest
from harness import Cluster, ClusterSpec, HarnessError, NodeSpec

pytestmark = pytest.mark.integration


def leftovers(client: Any, cluster: Cluster) -> list[Any]:
    """Containers and networks still carrying this cluster's run label."""
    flt = {"label": f"{harness.LABEL}={cluster.run_id}"}
    return [*client.containers.list(all=True, filters=flt), *client.networks.list(filters=flt)]


def test_exec_reconfigure_and_logs(
    make_cluster: Callable[..., Cluster], docker_client: Any, tmp_path: Path
) -> None:
    spec = ClusterSpec.simple(2, gpus=2)
    cluster = make_cluster(spec)
    res = cluster.exec("srun -N 2 --gres=gpu:2 bash -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'")
    assert res.rc == 0, res
    assert sorted(res.stdout.split("\n")[:2]) == ["node01 0,1", "node02 0,1"]
    rc, out, err = cluster.exec("ls /dev/nvidia1", node="node02")
    assert (rc, out, err) == (0, "/dev/nvidia1\n", "")
    blob = bytes(range(256))
    cluster.write_files({"blob.bin": blob}, path="/tmp")
    assert cluster.read_file("/tmp/blob.bin", node="node01") == blob
    cluster.put_file("node02", "/usr/local/bin/hello", "#!/bin/sh\necho hi\n", mode=0o755)
    assert cluster.exec("hello", node="node02").stdout == "hi\n"
    assert cluster.exec("test -e /usr/local/bin/hello", node="node01").rc == 1  # one node only
    with pytest.raises(harness.HarnessError, match="absolute file path"):
        cluster.put_file("node01", "relative/file", "x")

    tree = "SwitchName=leaf Nodes=node[01-02]\n"
    spec.topology_plugin, spec.topology_conf = "topology/tree", tree
    cluster.reconfigure(spec)
    switches = harness.parse_show_topology(cluster.show_topology()).switches
    assert [(s.name, s.nodes) for s in switches] == [("leaf", ["node01", "node02"])]
    cluster.wait_idle()
    assert "started on cluster" in cluster.slurmctld_log()
    check_shims(cluster, tmp_path)

    cluster.teardown()
    assert leftovers(docker_client, cluster) == []


def check_shims(cluster: Cluster, tmp_path: Path) -> None:
    """Host commands that are the controller's: arguments, exit code, the named variables,
    files copied in before and out after each call, and SIGTERM reaching the command."""
    staged, copied = tmp_path / "staged.txt", tmp_path / "hostname.txt"
    staged.write_text("from the host\n")
    env = cluster.shims(
        tmp_path / "bin",
        ["srun", "sinfo"],
        env=["PROBE"],
        copy_in={str(staged): "/tmp/staged.txt"},
        copy_out={"/etc/hostname": str(copied)},
    )
    env = {**env, "PROBE": "passed", "UNNAMED": "kept on the host"}
    script = 'echo "$PROBE|${UNNAMED:-}|$1"; exit 3'
    argv = ["srun", "-N", "1", "-w", "node01", "sh", "-c", script, "sh", "two words"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "passed||two words\n"), done.stderr
    assert cluster.read_file("/tmp/staged.txt") == b"from the host\n"
    assert copied.read_text() == "slurmctld\n"
    assert (
        subprocess.run(["sinfo", "-h", "-o", "%D"], env=env, capture_output=True).stdout == b"2\n"
    )

    copied.unlink()
    argv = ["srun", "-N", "1", "-w", "node02", "sleep", "300"]
    hung = subprocess.Popen(argv, env=env, start_new_session=True)
    try:
        wait_for(lambda: cluster.exec(["pgrep", "-x", "sleep"], node="node02").rc == 0)
        hung.terminate()
        assert hung.wait(timeout=30) == 143
        wait_for(lambda: cluster.exec(["pgrep", "-x", "sleep"], node="node02").rc == 1)
        assert copied.read_text() == "slurmctld\n"  # copied out after a signal too
    finally:
        hung.kill()


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.5)


def test_failed_node_start_is_one_error_with_slurmd_log(
    docker_client: Any, slurm_image: str
) -> None:
    # node02 claims 2 GPUs but gets one device file: slurmd gives up on gres.conf and exits.
    nodes = [NodeSpec("node01", gpus=2), NodeSpec("node02", gpus=2, fake_gpu_devices=1)]
    cluster = Cluster(ClusterSpec(nodes=nodes), slurm_image, client=docker_client)
    with pytest.raises(HarnessError) as err, cluster:
        cluster.wait_idle(timeout=90)
    text = str(err.value)
    assert "node02" in text
    assert "/dev/nvidia1" in text  # the slurmd log line saying what is wrong
    assert leftovers(docker_client, cluster) == []


def test_bad_controller_config_is_one_error_with_slurmctld_log(
    docker_client: Any, slurm_image: str
) -> None:
    # (24.11 ignores an unknown TopologyPlugin without a word; an unknown scheduler is fatal
    # on both versions.)
    spec = ClusterSpec.simple(1, slurm_conf_extra="SchedulerType=sched/bogus")
    cluster = Cluster(spec, slurm_image, client=docker_client)
    with pytest.raises(HarnessError) as err:
        cluster.start()
    assert "slurmctld exited" in str(err.value)
    assert "sched/bogus" in err.value.log
    assert leftovers(docker_client, cluster) == []


def test_image_without_slurm_is_refused(docker_client: Any, slurm_version: str) -> None:
    base = harness.ensure_base_image(slurm_version, docker_client)

    def of_base() -> set[str]:
        return {c["Id"] for c in docker_client.api.containers(all=True, filters={"ancestor": base})}

    before = of_base()
    cluster = Cluster(ClusterSpec.simple(1), base, client=docker_client)
    with pytest.raises(HarnessError, match="not a slurm-test-cluster image"):
        cluster.start()
    with pytest.raises(HarnessError, match="cannot run slurmctld"):
        Cluster(ClusterSpec.simple(1), base, version=slurm_version, client=docker_client).start()
    assert leftovers(docker_client, cluster) == []
    assert of_base() <= before  # the failed version probe left no container behind


def test_image_of_other_version_is_refused(docker_client: Any, slurm_version: str) -> None:
    other = next(v for v in harness.VERSIONS if v != slurm_version)
    image = harness.ensure_image(other, docker_client)
    cluster = Cluster(ClusterSpec.simple(1), image, version=slurm_version, client=docker_client)
    with pytest.raises(HarnessError, match=f"not Slurm {slurm_version}"):
        cluster.start()


def test_interrupt_during_start_tears_down(
    docker_client: Any, slurm_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(self: Cluster, files: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Cluster, "_start_nodes", interrupted)
    cluster = Cluster(ClusterSpec.simple(2), slurm_image, client=docker_client)
    with pytest.raises(KeyboardInterrupt):
        cluster.start()
    assert cluster.controller is not None  # it got as far as creating containers
    assert leftovers(docker_client, cluster) == []


def test_sweeper_removes_leftovers_of_dead_runs(docker_client: Any, slurm_image: str) -> None:
    run_id = uuid.uuid4().hex[:8]
    dead_owner = f"{socket.gethostname()}:{harness._pid_namespace()}:999999999:1"  # > pid_max
    labels = {harness.LABEL: run_id, harness.LABEL_OWNER: dead_owner}
    net = docker_client.networks.create(f"tsc-{run_id}", internal=True, labels=labels)
    docker_client.containers.create(
        slurm_image, ["true"], name=f"tsc-{run_id}-x", labels=labels, network=net.name
    )
    live = {**labels, harness.LABEL: run_id + "-live", harness.LABEL_OWNER: harness._owner()}
    alive = docker_client.containers.create(slurm_image, ["true"], labels=live)
    try:
        assert harness.sweep_leftovers(docker_client) >= 2
        flt = {"label": f"{harness.LABEL}={run_id}"}
        assert docker_client.containers.list(all=True, filters=flt) == []
        assert docker_client.networks.list(filters=flt) == []
        alive.reload()  # still there: its owner (this process) is alive
    finally:
        alive.remove(force=True)
