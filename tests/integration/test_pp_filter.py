"""``--pp-size`` beside ``--tp-size`` end to end on real Slurm 24.11 and 26.05 (issue 8).

The cluster of ``test_tp_filter.py`` (its fixture, one cluster per Slurm version for this
module): 16 nodes with 4 GPUs, four 4-node blocks, two nodes of every block kept busy. A
``--tp-size=4`` job has its TP groups inside single nodes, so without ``--pp-size`` it gets no
segment and ``-N 4`` waits for a whole free block; with ``--pp-size=2`` a model replica is 8
GPUs = 2 nodes, the filters ask for ``--segment=2`` and the job runs as 2+2, each replica in one
block. A replica larger than a block (``--tp-size=8 --pp-size=4``: 8 nodes) keeps only its TP
groups whole, as the record says.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest
import test_tp_filter
from test_tp_filter import (
    BYPASS_CONF,
    NESTED,
    NODES,
    TpCluster,
    assert_nested_sbatch_is_plain,
    assert_recorded,
    assert_rejected,
    assert_tp_placement,
    write_scripts,
)

pytestmark = pytest.mark.integration

#: The cluster fixture and the autouse one (daemon logs on failure, every job cancelled), as
#: fixtures of this module: one cluster per Slurm version for the tests below.
tp = test_tp_filter.tp
_cluster_logs_and_cleanup = test_tp_filter._cluster_logs_and_cleanup

FITS = "topograph:tp=4,gpn=4,group=1,pp=2,replica=2,unit=replica,segment=2,src=user"
PP_ONLY = "topograph:tp=1,gpn=4,group=1,pp=8,replica=2,unit=replica,segment=2,src=user"
OVER = "topograph:tp=8,gpn=4,group=2,pp=4,replica=8,unit=group,segment=2,src=user"


def test_pp_option_registered(tp: TpCluster) -> None:
    assert tp.build.rc == 0, tp.build.stderr
    for where in (None, NODES[-1]):  # the login node (controller) and a compute node
        helptext = tp.cluster.exec("sbatch --help", node=where).stdout
        assert re.search(r"--pp-size=N\s+pipeline-parallel stages per model replica", helptext)
    for bad in ("abc", "0", "-2", "2x"):
        res = tp.submit(f"--hold --tp-size=4 --pp-size={bad} --wrap true")
        assert res.rc != 0, bad
        assert "--pp-size must be a whole number from 1 to 65536" in res.stderr, res.stderr


def test_tp_alone_within_a_node_waits_for_a_whole_block(tp: TpCluster) -> None:
    """The baseline: --tp-size=4 needs no placement (its groups are single nodes)."""
    job = tp.sbatch("--tp-size=4 -N 4 --exclusive --wrap 'sleep 600'")
    time.sleep(5)  # a few main and backfill passes (bf_interval=2)
    assert (tp.cluster.job(job).state, tp.show(job).get("SegmentSize")) in (
        ("PENDING", None),
        ("PENDING", "0"),
    )


@pytest.mark.parametrize("how", ["option", "sbatch-line", "pp-only"])
def test_replicas_run_in_one_block_each(tp: TpCluster, how: str) -> None:
    write_scripts(tp)
    record = FITS
    if how == "option":
        job = tp.sbatch("--tp-size=4 --pp-size=2 -N 4 --exclusive /tmp/ranks.sh")
    elif how == "sbatch-line":
        script = tp.cluster.exec(["cat", "/tmp/ranks-hinted.sh"]).stdout
        script = script.replace("--tp-size=8", "--tp-size=4\n#SBATCH --pp-size=2")
        tp.cluster.write_files({"ranks-pp.sh": script}, path="/tmp")
        job = tp.sbatch("/tmp/ranks-pp.sh")
    else:
        record = PP_ONLY
        job = tp.sbatch("--pp-size=8 -N 4 --exclusive /tmp/ranks.sh")
    order = assert_tp_placement(tp, job)  # 2+2 in two blocks, ranks 2i and 2i+1 together
    assert len(order) == 4
    assert_recorded(tp, job, record)


def test_replica_over_a_block_keeps_tp_groups_whole(tp: TpCluster) -> None:
    job = tp.sbatch("--tp-size=8 --pp-size=4 -N 8 --exclusive --wrap 'sleep 600'")
    info = tp.cluster.wait_job(job, timeout=90)
    assert not set(info.nodes) & set(tp.busy), info
    assert sorted(Counter(tp.block_of[n] for n in info.nodes).values()) == [2, 2, 2, 2], info
    assert_recorded(tp, job, OVER)


def test_verbose_prints_the_replica(tp: TpCluster) -> None:
    res = tp.submit("-v --hold --tp-size=4 --pp-size=2 -N 4 --wrap true")
    assert res.rc == 0, res.stderr
    assert (
        "topograph: --tp-size=4 --pp-size=2 on gpu: 4 GPUs/node, 1 node(s) per TP group, "
        "replicas of 8 GPUs in units of 2 node(s) -> --segment=2"
    ) in res.stderr
    assert re.search(r"segment\s+: 2", res.stderr), res.stderr


def test_bypassing_cli_filter(tp: TpCluster) -> None:
    """26.05 segments from job_submit.lua; 24.11 records the decision, the job waits for a
    whole block (each replica still inside one)."""
    write_scripts(tp)
    res = tp.submit("--tp-size=4 --pp-size=2 -N 4 --exclusive /tmp/ranks.sh", conf=BYPASS_CONF)
    assert res.rc == 0, res.stderr
    job = tp.jobs[-1]
    assert tp.show(job)["AdminComment"] == FITS
    if tp.version != "24.11":
        assert_tp_placement(tp, job)
        assert tp.show(job)["SegmentSize"] == "2"
        return
    time.sleep(5)
    assert (tp.cluster.job(job).state, tp.cluster.job(job).nodes) == ("PENDING", [])


REJECTIONS = [
    (
        "--tp-size=2 --pp-size=3 -N 4",
        "--tp-size=2 --pp-size=3 makes model replicas of 6 GPUs; -N 4 gives 16 GPUs "
        "(4 per node), not a whole number of replicas: use -N 3 or -N 6",
    ),
    ("--pp-size=3 -N 2", "--pp-size=3 (--tp-size=1) makes model replicas of 3 GPUs"),
    (
        "--tp-size=4 --pp-size=2 -N 2-4",
        "--tp-size=4 --pp-size=2 makes model replicas of 8 GPUs and needs a fixed node count",
    ),
    ("--tp-size=32 --pp-size=2 -N 8", "the largest --tp-size that fits one block is 16"),
]


@pytest.mark.parametrize("conf", [None, BYPASS_CONF], ids=["cli_filter", "bypass"])
@pytest.mark.parametrize(
    ("args", "message"), REJECTIONS, ids=["gpus-not-replicas", "pp-only", "range", "tp-group"]
)
def test_impossible_requests_are_rejected(
    tp: TpCluster, conf: str | None, args: str, message: str
) -> None:
    assert_rejected(tp, args, message, conf)


def test_segment_that_splits_replicas_is_rejected(tp: TpCluster) -> None:
    res = tp.submit("--hold --tp-size=4 --pp-size=2 -N 4 --segment=1 --wrap true")
    assert res.rc != 0
    assert "--segment=1 would split model replicas of 2 nodes" in res.stderr, res.stderr


def test_updates_keep_whole_replicas(tp: TpCluster) -> None:
    job = tp.sbatch("--hold --tp-size=4 --pp-size=2 -N 4 --wrap true")
    res = tp.cluster.exec(["scontrol", "update", f"JobId={job}", "NumNodes=3"])
    assert res.rc != 0
    message = (
        "this job was submitted with --tp-size=4 --pp-size=2 (2 nodes per model replica unit); "
        "NumNodes=3 is not a multiple of 2"
    )
    assert message in res.stderr + res.stdout, (res.stdout, res.stderr)
    tp.cluster.exec(["scontrol", "update", f"JobId={job}", "NumNodes=6"]).check("update to 6")
    assert tp.show(job)["NumNodes"].split("-")[0] == "6"


def test_nested_sbatch_inherits_neither_size(tp: TpCluster) -> None:
    script = NESTED.replace("grep -i tp_size", "grep -i -e tp_size -e pp_size")
    assert_nested_sbatch_is_plain(tp, "--tp-size=4 --pp-size=2 -N 4 --exclusive", script)
