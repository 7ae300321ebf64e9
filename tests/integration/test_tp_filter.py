"""``--tp-size`` end to end on real Slurm 24.11 and 26.05 (issue 5).

One cluster per Slurm version serves the whole module: 16 nodes with 4 GPUs each, the
``topology.conf`` and the filters that ``topograph-slurm generate --filter-dir`` renders for a
simulated 16-node fabric (four 4-node blocks), the SPANK plugin compiled inside a node
container with the command ``topograph-slurm spank build`` runs, and two nodes of every block
kept busy by pinned exclusive jobs. ``-N 4`` then needs a whole free block and pends, while
``--tp-size=8 -N 4`` (two nodes per TP group) must run as 2+2 in two blocks.

What each path can do, as measured here:

- ``sbatch`` with cli_filter.lua: the filter turns ``--tp-size=8`` into ``--segment=2`` on
  both versions.
- A client that bypasses cli_filter.lua (its own slurm.conf without ``CliFilterPlugins``, via
  ``SLURM_CONF``; any user can do that): job_submit.lua still sees ``--tp-size`` in
  ``spank_job_env``. On 26.05 (>= 25.11.2) it sets ``segment_size`` itself, so the job runs
  2+2 with ``SegmentSize=2``. On 24.11 it cannot: the job keeps no segment, Slurm places it in
  one whole block (TP groups stay intact, it only waits longer), and impossible requests are
  still rejected. ``scontrol show job`` on 24.11 prints no ``SegmentSize`` at all.

The ``.so`` built in one node reaches every container through ``Cluster.read_file`` and
``Cluster.write_files``. ``client_configs`` below (a second client config directory on the
login node, derived from the live slurm.conf with lines dropped or files replaced, for
``SLURM_CONF=...`` bypass and probes) is the one helper the harness does not have.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import Shims
from harness import (
    Cluster,
    ClusterSpec,
    ExecResult,
    HarnessError,
    NodeSpec,
    PartitionSpec,
    check_image_version,
    parse_show_topology,
)

from tests.support.lua_fakes import OPTION_SENTINELS
from topograph_slurm.cli.main import main
from topograph_slurm.slurm.spank import spank_compile_command

pytestmark = pytest.mark.integration

GPUS = 4
SIM = "nodes=16,rails=1,su=4"  # 16 nodes, one 4-node leaf (= block) per scalable unit
NODES = [f"gpu{i:04d}" for i in range(1, 17)]
TOPOLOGY = "block"  # the partition's topology kind; benchmarks/bench_placement.py also runs tree
PARTITION = "gpu"
CONF = "/etc/slurm"
BYPASS_CONF = "/etc/slurm-bypass/slurm.conf"  # a client config without CliFilterPlugins
PROBE_CONF = "/etc/slurm-probe/slurm.conf"  # a client config whose cli_filter.lua is PROBE_LUA
SPANK_SO = f"{CONF}/tpsize.so"
SLEEP = "--wrap 'sleep 600'"
RECORD = "topograph:tp=8,gpn=4,group=2,segment=2,src=user"

#: A batch script that records, per rank, the node and its SLURM_TOPOLOGY_ADDR (block.node).
RANKS = """#!/bin/bash
#SBATCH -o /tmp/ranks-%j.out
srun -l --ntasks-per-node=1 bash -c 'echo "$(hostname) $SLURM_TOPOLOGY_ADDR"'
srun -N 1 -n 1 true && echo one-node-step-ok
sleep 600
"""
#: The same with the hint in #SBATCH lines instead of on the command line.
RANKS_HINTED = RANKS.replace(
    "#SBATCH -o", "#SBATCH --tp-size=8\n#SBATCH -N 4\n#SBATCH --exclusive\n#SBATCH -o"
)

#: A cli_filter.lua that prints what slurm_cli_pre_submit receives, then refuses the job (so
#: probing submits nothing).
PROBE_LUA = r"""
local KEYS = {"type", "jobid", "nodes", "segment", "switches", "exclusive", "ntasks-per-node",
  "verbose", "quiet", "partition", "gres", "gpus-per-node"}
function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
function slurm_cli_pre_submit(options, offset)
  local out = {}
  for _, k in ipairs(KEYS) do
    local v = options[k]
    if v ~= nil then out[#out + 1] = k .. "=" .. type(v) .. ":" .. tostring(v) end
  end
  local spank = options.spank
  local plugin = type(spank) == "table" and spank["tpsize"] or nil
  if type(plugin) == "table" and plugin["tp-size"] ~= nil then
    out[#out + 1] = "tp-size=" .. type(plugin["tp-size"]) .. ":" .. tostring(plugin["tp-size"])
  end
  io.stderr:write("PROBE " .. _VERSION .. "|" .. table.concat(out, "|") .. "\n")
  return slurm.ERROR
end
function slurm_cli_post_submit(offset, jobid, stepid) return slurm.SUCCESS end
return slurm.SUCCESS
"""


@dataclass
class TpCluster:
    """The module's cluster plus what the tests need to know about it."""

    cluster: Cluster
    version: str
    release: str
    files: dict[str, str]
    block_of: dict[str, str]
    busy: list[str]
    build: ExecResult
    jobs: list[str] = field(default_factory=list)

    def submit(self, args: str, *, conf: str | None = None) -> ExecResult:
        """``sbatch --parsable <args>``, through another client config when ``conf`` is set."""
        env = f"SLURM_CONF={conf} " if conf else ""
        res = self.cluster.exec(f"{env}sbatch --parsable {args}")
        if res.rc == 0:
            self.jobs.append(res.stdout.strip().split(";")[0])
        return res

    def sbatch(self, args: str, *, conf: str | None = None) -> str:
        res = self.submit(args, conf=conf)
        if res.rc != 0:
            raise HarnessError(f"sbatch {args} failed (rc={res.rc}): {res.stderr.strip()}")
        return self.jobs[-1]

    def show(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as key -> value (values with spaces are cut at the space)."""
        text = self.cluster.exec(["scontrol", "-o", "show", "job", job_id]).check("show").stdout
        return dict(re.findall(r"(\S+?)=(\S*)", text))

    def cancel(self) -> None:
        """Cancel every job a test submitted and wait until their nodes are free again."""
        if self.jobs:
            self.cluster.exec(["scancel", *self.jobs])
            for job_id in self.jobs:
                self.cluster.wait_job(job_id, ("CANCELLED", "COMPLETED", "FAILED"), timeout=60)
        self.jobs.clear()
        self.cluster.wait_idle(len(NODES) - len(self.busy), timeout=60)


# --------------------------------------------------------------------------------------------
# Module setup
# --------------------------------------------------------------------------------------------


def release_of(docker_client: Any, image: str, version: str) -> str:
    """The exact Slurm release of the image ("24.11.5"): the filters target it."""
    text = check_image_version(docker_client, image, version)
    match = re.search(r"\d+\.\d+\.\d+", text)
    assert match, text
    return match.group(0)


def generate(workdir: Path, release: str) -> dict[str, str]:
    """Run ``topograph-slurm generate --filter-dir`` on the simulated fabric; file -> text."""
    config = workdir / "config.yaml"
    facts = {"partitions": {PARTITION: {"topology": TOPOLOGY, "gpus_per_node": GPUS}}}
    facts |= {"default_partition": PARTITION, "switch_wait": 300, "spank_path": SPANK_SO}
    config.write_text(yaml.safe_dump({"filter": facts}))
    out = workdir / "filters"
    args = ["--config", str(config), "generate", "--sim", SIM, "--format", TOPOLOGY]
    args += ["--slurm-version", release, "-o", str(workdir / "topology.conf")]
    result = CliRunner().invoke(main, [*args, "--filter-dir", str(out)])
    assert result.exit_code == 0, result.output
    files = {p.name: p.read_text() for p in out.iterdir() if not p.name.startswith(".")}
    files["topology.conf"] = (workdir / "topology.conf").read_text()
    return files


def cluster_spec(files: dict[str, str]) -> ClusterSpec:
    return ClusterSpec(
        nodes=[NodeSpec(name, cpus=4, gpus=GPUS) for name in NODES],
        partitions=[PartitionSpec(PARTITION, default=True)],
        topology_plugin=f"topology/{TOPOLOGY}",
        topology_conf=files["topology.conf"],
        job_submit_lua=files["job_submit.lua"],
        cli_filter_lua=files["cli_filter.lua"],
        plugstack_conf=files["plugstack.conf"],  # "optional": harmless until the .so exists
        extra_files={"tpsize.c": files["tpsize.c"]},
    )


def build_plugin(cluster: Cluster) -> ExecResult:
    """Compile tpsize.c in the first node's container and install the .so everywhere."""
    tmp = Path("/tmp/tpsize.so")
    cmd = spank_compile_command("cc", Path(f"{CONF}/tpsize.c"), tmp)
    res = cluster.exec(cmd, node=NODES[0])
    if res.rc == 0:
        cluster.write_files({"tpsize.so": cluster.read_file(str(tmp), node=NODES[0])})
    return res


def client_configs(cluster: Cluster) -> None:
    """On the controller (our login node): the bypass and the probe client configs."""
    script = f"""
set -e
for d in $(dirname {BYPASS_CONF}) $(dirname {PROBE_CONF}); do
    mkdir -p $d && cp {CONF}/slurm.conf {CONF}/plugstack.conf $d/
done
sed -i '/^CliFilterPlugins/d' {BYPASS_CONF}
cat > $(dirname {PROBE_CONF})/cli_filter.lua <<'EOF'
{PROBE_LUA}
EOF
"""
    cluster.exec(script).check("client configs")


def occupy_two_per_block(cluster: Cluster, block_of: dict[str, str]) -> list[str]:
    """Pin an exclusive sleep job on the first two nodes of every block."""
    members: dict[str, list[str]] = {}
    for name in NODES:
        members.setdefault(block_of[name], []).append(name)
    busy = [nodes[i] for nodes in members.values() for i in (0, 1)]
    pin(cluster, busy)
    return busy


def pin(cluster: Cluster, nodes: list[str]) -> None:
    jobs = {
        cluster.sbatch(f"--exclusive -N 1 -w {name} -J busy {SLEEP}"): n
        for n, name in enumerate(nodes)
    }
    for job_id, n in jobs.items():
        assert cluster.wait_job(job_id).nodes == [nodes[n]]


@pytest.fixture(scope="module")
def tp(
    docker_client: Any,
    slurm_version: str,
    slurm_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TpCluster]:
    release = release_of(docker_client, slurm_image, slurm_version)
    files = generate(tmp_path_factory.mktemp(f"tp-{slurm_version}"), release)
    cluster = Cluster(cluster_spec(files), slurm_image, client=docker_client)
    try:
        cluster.start()
        cluster.wait_idle()
        build = build_plugin(cluster)
        client_configs(cluster)
        topo = parse_show_topology(cluster.show_topology())
        block_of = {n: b.name for b in topo.base_blocks for n in b.nodes}
        busy = occupy_two_per_block(cluster, block_of)
        yield TpCluster(cluster, slurm_version, release, files, block_of, busy, build)
    finally:
        cluster.teardown()


@pytest.fixture(autouse=True)
def _cluster_logs_and_cleanup(request: pytest.FixtureRequest, tp: TpCluster) -> Iterator[None]:
    """Failed tests carry the daemon logs (conftest hook); every test cancels its own jobs."""
    request.node._slurm_clusters = [tp.cluster]
    yield
    tp.cancel()


# --------------------------------------------------------------------------------------------
# Helpers for placement
# --------------------------------------------------------------------------------------------


def ranks(tp: TpCluster, job_id: str, first_node: str, timeout: float = 60) -> list[str]:
    """Nodes of the job in rank order, read from the job's own srun output."""
    path = f"/tmp/ranks-{job_id}.out"
    deadline = time.monotonic() + timeout
    while True:
        text = tp.cluster.exec(["cat", path], node=first_node).stdout
        rows = sorted(
            (int(m.group(1)), m.group(2), m.group(3))
            for m in re.finditer(r"^(\d+): (\S+) (\S+)$", text, re.MULTILINE)
        )
        if len(rows) == 4 and "one-node-step-ok" in text:
            break
        if time.monotonic() > deadline:
            raise HarnessError(f"{path} on {first_node} incomplete:\n{text}")
        time.sleep(0.5)
    for _, node, addr in rows:  # SLURM_TOPOLOGY_ADDR is block.node
        assert addr == f"{tp.block_of[node]}.{node}", (node, addr)
    return [node for _, node, _ in rows]


def assert_tp_placement(tp: TpCluster, job_id: str) -> list[str]:
    """2+2 nodes of two blocks, none busy, and every TP pair (ranks 2i, 2i+1) in one block."""
    info = tp.cluster.wait_job(job_id, timeout=90)
    assert len(info.nodes) == 4 and not set(info.nodes) & set(tp.busy), info
    assert sorted(Counter(tp.block_of[n] for n in info.nodes).values()) == [2, 2], info
    order = ranks(tp, job_id, info.nodes[0])
    assert sorted(order) == sorted(info.nodes)
    pairs = [order[i : i + 2] for i in range(0, 4, 2)]
    assert all(tp.block_of[a] == tp.block_of[b] for a, b in pairs), (order, tp.block_of)
    return order


def write_scripts(tp: TpCluster) -> None:
    tp.cluster.write_files({"ranks.sh": RANKS, "ranks-hinted.sh": RANKS_HINTED}, path="/tmp")


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def test_spank_plugin_builds_and_registers(tp: TpCluster) -> None:
    assert tp.build.rc == 0, tp.build.stderr
    for where in (None, NODES[-1]):  # the login node (controller) and a compute node
        helptext = tp.cluster.exec("sbatch --help", node=where).stdout
        assert re.search(r"--tp-size=N\s+GPUs per tensor-parallel group", helptext), helptext
    for bad in ("abc", "0", "-4", "8x"):
        res = tp.submit(f"--hold --tp-size={bad} --wrap true")
        assert res.rc != 0, bad
        assert "--tp-size must be a whole number" in res.stderr, res.stderr


def test_topology_is_the_generated_one(tp: TpCluster) -> None:
    expected = dict(re.findall(r"^BlockName=(\S+) Nodes=(\S+)$", tp.files["topology.conf"], re.M))
    assert len(expected) == 4
    assert Counter(tp.block_of.values()) == Counter({name: 4 for name in expected})


def test_plain_whole_block_job_pends(tp: TpCluster) -> None:
    """The baseline the hint improves on: -N 4 wants one whole free block and there is none."""
    job = tp.sbatch(f"--exclusive -N 4 {SLEEP}")
    time.sleep(5)  # a few main and backfill passes (bf_interval=2)
    info = tp.cluster.job(job)
    assert (info.state, info.nodes) == ("PENDING", []), info


@pytest.mark.parametrize("how", ["option", "sbatch-line"])
def test_tp_size_runs_two_plus_two(tp: TpCluster, how: str) -> None:
    write_scripts(tp)
    if how == "option":
        job = tp.sbatch("--tp-size=8 -N 4 --exclusive /tmp/ranks.sh")
    else:
        job = tp.sbatch("/tmp/ranks-hinted.sh")
    assert_tp_placement(tp, job)
    assert assert_recorded(tp, job, RECORD)["NumNodes"] == "4"


def assert_recorded(tp: TpCluster, job_id: str, record: str, segment: str = "2") -> dict[str, str]:
    """The job carries *record* and (where scontrol prints it) the segment, and job_submit.lua
    never fell back to "keep the job as submitted" (e.g. a missing slurm.log_*); its fields."""
    fields = tp.show(job_id)
    assert fields["AdminComment"] == record, fields
    if tp.version != "24.11":  # 24.11's scontrol does not print the segment
        assert fields["SegmentSize"] == segment, fields
    assert "topograph job_submit: internal error" not in tp.cluster.slurmctld_log()
    return fields


def test_verbose_prints_the_decision(tp: TpCluster) -> None:
    res = tp.submit("-v --hold --tp-size=8 -N 4 --wrap true")
    assert res.rc == 0, res.stderr
    assert "topograph: --tp-size=8 on gpu: 4 GPUs/node, 2 node(s) per TP group" in res.stderr
    assert re.search(r"segment\s+: 2", res.stderr), res.stderr


@pytest.mark.parametrize("conf", [None, BYPASS_CONF], ids=["cli_filter", "bypass"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("--tp-size=3 -N 4", "--tp-size=3 does not divide the 4 GPUs of a node"),
        ("--tp-size=8 -N 3", "-N 3 is not a multiple of 2: use -N 2 or -N 4"),
        ("--tp-size=32 -N 8", "the largest --tp-size that fits one block is 16"),
    ],
    ids=["tp-splits-a-node", "N-not-a-multiple", "group-over-a-block"],
)
def test_impossible_requests_are_rejected(
    tp: TpCluster, conf: str | None, args: str, message: str
) -> None:
    """Rejected by cli_filter.lua, and by job_submit.lua when the client filter is bypassed."""
    assert_rejected(tp, args, message, conf)


def assert_rejected(tp: TpCluster, args: str, message: str, conf: str | None) -> None:
    """sbatch *args* fails with *message*, from the client filter (conf None) or from the
    controller (a bypassing client config), and nothing was queued."""
    before = tp.cluster.exec(["squeue", "-h", "-o", "%i"]).stdout
    res = tp.submit(f"--hold {args} --wrap true", conf=conf)
    assert res.rc != 0
    assert message in res.stderr, res.stderr
    if conf is None:
        assert "cli_filter plugin terminated with error" in res.stderr
    else:
        assert "Batch job submission failed" in res.stderr
    assert tp.cluster.exec(["squeue", "-h", "-o", "%i"]).stdout == before


def test_decision_record_keeps_user_comment(tp: TpCluster) -> None:
    job = tp.sbatch("--hold --tp-size=8 -N 4 --comment=ticket-42 --wrap true")
    fields = tp.show(job)
    assert fields["AdminComment"] == RECORD
    assert fields["Comment"] == "ticket-42"
    within = tp.show(tp.sbatch("--hold --tp-size=4 -N 3 --wrap true"))
    assert within["AdminComment"] == "topograph:tp=4,gpn=4,group=1,src=user"
    assert "SegmentSize" not in within


VOLATILE = {
    "JobId", "SubmitTime", "EligibleTime", "AccrueTime", "LastSchedEval", "AllocNode:Sid", "StdErr",
    "StdOut", "StdIn", "Priority",
}  # fmt: skip


def test_job_without_hint_is_unchanged(tp: TpCluster) -> None:
    """Same submission with the filters and with no filter plugins at all: same job."""
    args = "--hold -N 4 --exclusive --comment=mine --wrap true"
    filtered = tp.show(tp.sbatch(args))
    assert "AdminComment" not in filtered and "SegmentSize" not in filtered, filtered
    bare = ClusterSpec(**{**vars(tp.cluster.spec), "job_submit_lua": None, "cli_filter_lua": None})
    original = tp.cluster.spec
    tp.cluster.reconfigure(bare)
    try:
        plain = tp.show(tp.sbatch(args))
    finally:
        tp.cluster.reconfigure(original)
    strip = lambda d: {k: v for k, v in d.items() if k not in VOLATILE}  # noqa: E731
    assert strip(filtered) == strip(plain)


def test_bypassing_cli_filter(tp: TpCluster) -> None:
    """A client without cli_filter: 26.05 still segments from job_submit.lua, 24.11 cannot."""
    write_scripts(tp)
    res = tp.submit("-v --tp-size=8 -N 4 --exclusive /tmp/ranks.sh", conf=BYPASS_CONF)
    assert res.rc == 0, res.stderr
    assert "topograph:" not in res.stderr and "segment" not in res.stderr  # really bypassed
    job = tp.jobs[-1]
    if tp.version != "24.11":
        assert_tp_placement(tp, job)
        fields = tp.show(job)
        assert fields["SegmentSize"] == "2", fields
        assert fields["AdminComment"] == RECORD
        return
    # 24.11: no segment_size from job_submit.lua, so Slurm wants one whole free block.
    time.sleep(5)
    info = tp.cluster.job(job)
    assert (info.state, info.nodes) == ("PENDING", []), info
    assert tp.show(job)["AdminComment"] == RECORD
    # Free one block: the job takes all of it, so every TP group is still inside one block.
    last_block = tp.block_of[NODES[-1]]
    busy_jobs = tp.cluster.exec(["squeue", "-h", "-n", "busy", "-o", "%i %N"]).stdout.split("\n")
    freed = [line.split() for line in busy_jobs if line.strip()]
    freed = [(j, n) for j, n in freed if tp.block_of[n] == last_block]
    tp.cluster.exec(["scancel", *[j for j, _ in freed]])
    try:
        started = tp.cluster.wait_job(job, timeout=90)
        assert {tp.block_of[n] for n in started.nodes} == {last_block}, started
        assert len(started.nodes) == 4
    finally:
        tp.cancel()
        pin(tp.cluster, [n for _, n in freed])


def test_updates_keep_whole_tp_groups(tp: TpCluster) -> None:
    """scontrol update of a --tp-size job: slurm_job_modify re-checks the node count."""
    job = tp.sbatch("--hold --tp-size=8 -N 4 --wrap true")
    res = tp.cluster.exec(["scontrol", "update", f"JobId={job}", "NumNodes=3"])
    assert res.rc != 0
    message = "this job was submitted with --tp-size=8 (2 nodes per TP group); NumNodes=3"
    assert message in res.stderr + res.stdout, (res.stdout, res.stderr)
    nodes = lambda job_id: tp.show(job_id)["NumNodes"].split("-")[0]  # noqa: E731 ("4-4")
    assert nodes(job) == "4"
    ok = tp.cluster.exec(["scontrol", "update", f"JobId={job}", "NumNodes=6"])
    assert ok.rc == 0, ok.stderr
    assert nodes(job) == "6"
    plain = tp.sbatch("--hold -N 4 --wrap true")  # no hint: any change is Slurm's business
    tp.cluster.exec(["scontrol", "update", f"JobId={plain}", "NumNodes=3"]).check("plain update")
    assert nodes(plain) == "3"


#: A --tp-size job whose script submits a one-node job of its own, as pipelines do.
NESTED = """#!/bin/bash
env | grep -i tp_size > /tmp/nested-env-$SLURM_JOB_ID
sbatch --parsable --hold -N 1 --wrap true > /tmp/nested-$SLURM_JOB_ID.tmp 2>&1
mv /tmp/nested-$SLURM_JOB_ID.tmp /tmp/nested-$SLURM_JOB_ID
sleep 600
"""


def test_nested_sbatch_does_not_inherit_the_hint(tp: TpCluster) -> None:
    """A job submitted from inside a --tp-size job is the user's next request, not a TP group:
    it must not inherit --tp-size (it would be rejected here: -N 1 cannot hold 8 GPUs)."""
    assert_nested_sbatch_is_plain(tp, "--tp-size=8 -N 4 --exclusive", NESTED)


def assert_nested_sbatch_is_plain(tp: TpCluster, args: str, script: str) -> None:
    """Run *script* (a NESTED-like job) with *args*: its own sbatch must succeed with no
    record, and the job's environment must hold none of the sizes *script* greps for."""
    tp.cluster.write_files({"nested.sh": script}, path="/tmp")
    job = tp.sbatch(f"{args} /tmp/nested.sh")
    first = tp.cluster.wait_job(job, timeout=90).nodes[0]
    deadline = time.monotonic() + 60
    while (res := tp.cluster.exec(["cat", f"/tmp/nested-{job}"], node=first)).rc != 0:
        assert time.monotonic() < deadline, "nested sbatch never finished"
        time.sleep(0.5)
    env = tp.cluster.exec(["cat", f"/tmp/nested-env-{job}"], node=first).stdout
    nested = res.stdout.strip()
    assert nested.isdigit(), f"nested sbatch failed: {nested!r}; sizes in env: {env!r}"
    tp.jobs.append(nested)
    assert "AdminComment" not in tp.show(nested)
    assert env == "", env


def test_cli_filter_options_match_the_fakes(tp: TpCluster) -> None:
    """What slurm_cli_pre_submit really receives, against tests/support/lua_fakes.py."""

    def probe(args: str) -> dict[str, str]:
        res = tp.cluster.exec(f"SLURM_CONF={PROBE_CONF} sbatch --hold {args} --wrap true")
        assert res.rc != 0  # the probe refuses every job
        line = next(x for x in res.stderr.splitlines() if x.startswith("PROBE "))
        version, *pairs = line.removeprefix("PROBE ").split("|")
        assert version == "Lua 5.1"  # Debian's build, both releases
        return dict(p.split("=", 1) for p in pairs)

    unset = probe("")
    assert {k: v.removeprefix("string:") for k, v in unset.items()} == OPTION_SENTINELS
    given = probe("-v -N 4 --tp-size=8 --gres=gpu:2 --segment=2 --switches=2@1:00 -p gpu")
    assert given["nodes"] == "string:4" and given["tp-size"] == "string:8"
    assert given["verbose"] == "string:1" and given["segment"] == "string:2"
    assert given["gres"] == "string:gres/gpu:2" and given["partition"] == "string:gpu"
    assert given["switches"] == "string:2@00:01:00"
    assert probe("-N 4-4 --gpus-per-node=2 --exclusive")["nodes"] == "string:4"
    ranged = probe("-N 2-4 --gpus-per-node=2 --exclusive")
    assert ranged["nodes"] == "string:2-4" and ranged["gpus-per-node"] == "string:2"
    assert ranged["exclusive"] == "string:exclusive"


def test_explain_says_a_tp_size_job_keeps_every_tp_group_in_a_block(
    tp: TpCluster, monkeypatch: pytest.MonkeyPatch, shims: Shims
) -> None:
    """`explain JOBID` reads the job (nodes in Slurm's rank order, GPUs per node, tp from the
    filter's record) and the running topology through the real scontrol of the controller."""
    job = tp.sbatch("--tp-size=8 -N 4 --exclusive --wrap 'sleep 300'")
    nodes = tp.cluster.wait_job(job).nodes
    monkeypatch.setenv("PATH", shims(tp.cluster, "scontrol")["PATH"])  # the in-process CLI's
    result = CliRunner().invoke(main, ["--config", os.devnull, "explain", job, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["layout"]["tp"] == 8 and data["gpus_per_node"] == GPUS
    assert sorted(data["nodes"]) == sorted(nodes)
    assert data["kinds"]["tp"]["crossing"]["domain"] == 0, data
