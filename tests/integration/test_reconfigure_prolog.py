"""``generate --reconfigure`` does not lose a job whose Prolog runs, on real slurmctld.

Slurm up to 26.05 with ``PrologFlags=DeferBatch`` discards a batch job's deferred launch when
``scontrol reconfigure`` runs while that job's Prolog runs: the job stays RUNNING and its
script never starts (fixed for 26.11). The cluster here has ``PrologFlags=Alloc,DeferBatch``
and a Prolog that sleeps 20 s. The test shows the loss itself with a bare ``scontrol
reconfigure``, then that ``generate --reconfigure`` waits for the prolog (the job completes),
and that past ``--reconfigure-wait`` it gives up: exit 12, the previous file restored.

topograph-slurm runs on the host through the ``scontrol``/``sinfo`` shims, as in
test_reconfigure.py (the host's topology.conf copied to the controller before each call).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

pytestmark = pytest.mark.integration

NODES = [f"gpu{i:04d}" for i in range(1, 5)]
SIM = "nodes=6,rails=1,su=2,tiers=2"
START = "SwitchName=s1 Nodes=gpu[0001-0004]\n"
PROLOG_SECONDS = 20
PROLOG = f"#!/bin/sh\nsleep {PROLOG_SECONDS}\nexit 0\n"
#: the batch script: done in a second once launched
JOB = "-N1 --wrap 'echo launched; sleep 1'"


def _cluster(make_cluster: Any, shims: Shims, tmp_path: Path) -> tuple[Cluster, Path, dict]:
    extra = "PrologFlags=Alloc,DeferBatch\nProlog=/etc/slurm/prolog.sh\n"
    cluster = make_cluster(
        ClusterSpec(
            nodes=[NodeSpec(node, 4, 0) for node in NODES],
            slurmctld_daemon=True,
            topology_plugin="topology/tree",
            topology_conf=START,
            slurm_conf_extra=extra,
            extra_files={"prolog.sh": PROLOG},
        )
    )
    for node in NODES:  # extra files arrive 0644; slurmd runs the Prolog only at a job
        cluster.exec(["chmod", "755", "/etc/slurm/prolog.sh"], node=node).check("chmod")
    conf, log = tmp_path / "topology.conf", tmp_path / "slurmctld.log"
    conf.write_text(START)
    (tmp_path / "config.yaml").write_text(f"slurmctld_log: {log}\n")
    env = shims(
        cluster,
        "scontrol",
        "sinfo",
        copy_in={str(conf): "/etc/slurm/topology.conf"},
        copy_out={"/var/log/slurm/slurmctld.log": str(log)},
    )
    return cluster, conf, env


def _in_prolog(cluster: Cluster) -> str:
    """Submit the job and return its id once its Prolog runs (RUNNING, reason Prolog)."""
    job = cluster.sbatch(JOB)
    deadline = time.monotonic() + 30
    while cluster.job(job).reason != "Prolog":
        assert time.monotonic() < deadline, cluster.job(job)
        time.sleep(0.5)
    return job


def _finishes(cluster: Cluster, job: str, within: float) -> bool:
    """Whether the job completes within *within* seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if cluster.job(job).state == "COMPLETED":
            return True
        time.sleep(1)
    return False


def _generate(tmp_path: Path, env: dict[str, str], wait: str) -> Result:
    args = ["--config", str(tmp_path / "config.yaml"), "generate", "--sim", SIM]
    args += ["-o", str(tmp_path / "topology.conf"), "--reconfigure", "--reconfigure-wait", wait]
    args += ["--metrics", str(tmp_path / "run.prom")]
    return CliRunner().invoke(main, args, env=env)


def _metric(tmp_path: Path, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = (tmp_path / "run.prom").read_text()
    found = [s.value for f in text_string_to_metric_families(text) for s in f.samples]
    names = [s.name for f in text_string_to_metric_families(text) for s in f.samples]
    return found[names.index(name)]


def test_reconfigure_waits_for_a_prolog_and_the_job_runs(
    make_cluster: Any, shims: Shims, tmp_path: Path
) -> None:
    cluster, conf, env = _cluster(make_cluster, shims, tmp_path)

    # 1. the loss itself: a bare reconfigure during the Prolog, the script never launches
    lost = _in_prolog(cluster)
    cluster.exec(["scontrol", "reconfigure"]).check("scontrol reconfigure")
    assert not _finishes(cluster, lost, PROLOG_SECONDS + 25)
    assert cluster.job(lost).state == "RUNNING"  # held by Slurm, its batch launch gone
    cluster.exec(["scancel", lost])
    cluster.wait_idle()

    # 2. past --reconfigure-wait: nothing applied, the previous file back, exit 12
    job = _in_prolog(cluster)
    result = _generate(tmp_path, env, "5s")
    assert result.exit_code == Exit.DEFERRED, result.output
    assert f"reconfigure not run: job {job} still in its prolog (waited " in result.stderr
    assert conf.read_text() == START
    assert (tmp_path / "topology.conf.deferred").read_text() != START
    assert _metric(tmp_path, "topograph_slurm_success") == 0
    assert _metric(tmp_path, "topograph_slurm_reconfigure_deferred_seconds") > 0
    assert _finishes(cluster, job, PROLOG_SECONDS + 25)  # no reconfigure ran: the job ran

    # 3. within the bound: it waits for the prolog, reconfigures, and the job still runs
    job = _in_prolog(cluster)
    result = _generate(tmp_path, env, "2m")
    assert result.exit_code == Exit.OK, result.output
    assert f"reconfigure deferred: job {job} in its prolog (Slurm " in result.stderr
    assert "slurmctld reconfigured" in result.stderr
    assert _metric(tmp_path, "topograph_slurm_reconfigured") == 1
    assert _metric(tmp_path, "topograph_slurm_reconfigure_deferred_seconds") > 5
    assert _finishes(cluster, job, 30)
    assert "SwitchName=leaf-su002-r0 Nodes=gpu[0003-0004]" in conf.read_text()
