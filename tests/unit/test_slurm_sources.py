"""What Slurm says about a job, its nodes and its topology, read from its real output shapes.

The snippets mirror what 24.11.5 and 26.05.5 printed in tests/integration/
test_slurm_job_sources.py (trimmed to the fields read; the comment says which version).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from topograph_slurm.errors import CollectError, InputError, UsageError
from topograph_slurm.model.health import SlurmNode
from topograph_slurm.model.job import TpRecord, parse_tp_record
from topograph_slurm.slurm.jobs import parse_scontrol_job, parse_scontrol_jobs, scontrol_job
from topograph_slurm.slurm.nodes import (
    parse_node_gpus,
    parse_node_states,
    parse_node_table,
    parse_scontrol_nodes,
    slurm_rank_order,
)
from topograph_slurm.slurm.partitions import parse_partition_nodes
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.slurm.topology import parse_show_topology, scontrol_topology


def allocation(*names: str) -> list[dict[str, object]]:
    return [
        {"index": i, "name": name, "cpus": {"count": 4, "used": 0}} for i, name in enumerate(names)
    ]


# 24.11.5, topology/block, nodes defined node08…node01: the list is in slurm.conf order.
JOB_2411 = {
    "job_id": 1,
    "job_state": ["RUNNING"],
    "nodes": "node[08,07,06,05,03,01]",
    "tres_per_node": "gres/gpu:4",
    "tres_per_job": "",
    "gres_detail": ["gpu:4(IDX:0-3)"] * 6,
    "admin_comment": "topograph:tp=8,gpn=4,group=2,segment=2,src=user",
    "job_resources": {
        "select_type": ["CORE"],
        "nodes": {
            "count": 6,
            "list": "node[08,07,06,05,03,01]",
            "allocation": allocation("node08", "node07", "node06", "node05", "node03", "node01"),
        },
    },
}
# 26.05.5, a pending job: no nodes, job_resources null, no GPUs asked for.
PENDING_2605 = {
    "job_id": 3,
    "job_state": ["PENDING"],
    "nodes": "",
    "tres_per_node": "",
    "gres_detail": [],
    "admin_comment": "",
    "job_resources": None,
}


def jobs(*entries: dict[str, object]) -> str:
    return json.dumps({"jobs": list(entries), "errors": [], "warnings": []})


def test_running_job_keeps_slurms_node_order_gpus_and_record() -> None:
    job = parse_scontrol_job(jobs(JOB_2411), "1")
    assert job.job_id == "1" and job.state == "RUNNING"
    assert job.nodes == ("node08", "node07", "node06", "node05", "node03", "node01")
    assert job.gpus_per_node == 4
    assert job.tp == 8
    assert job.record == TpRecord(8, 4, 2, 2, "user")


def test_allocation_is_read_by_its_index_not_its_list_position() -> None:
    entry = json.loads(json.dumps(JOB_2411))
    entry["job_resources"]["nodes"]["allocation"].reverse()
    assert parse_scontrol_job(jobs(entry), "1").nodes[0] == "node08"


def test_pending_job_has_no_nodes_and_no_gpus() -> None:
    job = parse_scontrol_job(jobs(PENDING_2605), "3")
    assert (job.state, job.nodes, job.gpus_per_node, job.tp) == ("PENDING", (), None, None)


def test_finished_job_without_allocation_falls_back_to_the_hostlist() -> None:
    entry = dict(PENDING_2605, job_state=["COMPLETED"], nodes="node[01-02]")
    assert parse_scontrol_job(jobs(entry), "3").nodes == ("node01", "node02")


@pytest.mark.parametrize(
    ("detail", "tres", "expected"),
    [
        (["gpu:2(IDX:0-1)", "gpu:2(IDX:0-1)"], "gres/gpu:2", 2),  # --gpus-per-node=2 (both)
        (["gpu:4(IDX:0-3)"], "", 4),  # --exclusive without --gres still lists the GPUs
        (["gpu:h100:8(IDX:0-7)"], "gres/gpu:h100:8", 8),
        (["gpu:a:2(IDX:0-1),gpu:b:2(IDX:2-3)"], "", 4),
        (["gpu:4(IDX:0-3)", "gpu:2(IDX:0-1)"], "gres/gpu:2", None),  # uneven: not one count
        ([], "gres/gpu:4", 4),
        ([], "gres/gpu=4", 4),
        ([], "", None),
    ],
)
def test_gpus_per_node(detail: list[str], tres: str, expected: int | None) -> None:
    entry = dict(JOB_2411, gres_detail=detail, tres_per_node=tres)
    assert parse_scontrol_job(jobs(entry), "1").gpus_per_node == expected


def test_array_job_picks_the_task_asked_for() -> None:
    first, second = dict(JOB_2411, job_id=5), dict(PENDING_2605, job_id=6)
    assert parse_scontrol_job(jobs(first, second), "6").state == "PENDING"


def test_unknown_job_is_an_input_error() -> None:
    """Both versions print ``"jobs": []`` and exit 0 for an unknown job id."""
    with pytest.raises(InputError, match="job 999 not found"):
        parse_scontrol_job(jobs(), "999")


@pytest.mark.parametrize("text", ["", "{", "[]", '{"jobs": [{"nodes": "x"}]}', '{"jobs": 3}'])
def test_malformed_job_output_is_one_input_error(text: str) -> None:
    with pytest.raises(InputError, match="scontrol show job --json"):
        parse_scontrol_job(text, "1")


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("topograph:tp=8,gpn=4,group=2,segment=2,src=user", TpRecord(8, 4, 2, 2, "user")),
        (
            "site note topograph:tp=16,gpn=4,group=4,src=default",
            TpRecord(16, 4, 4, None, "default"),
        ),
        ("topograph:tp=8,gpn=8,group=1,switches=1@300,src=user", TpRecord(8, 8, 1, None, "user")),
        ("topograph:tp=8,gpn=4", None),
        ("topograph:tp=0,gpn=4,group=1,src=user", None),
        ("topograph:tp=8x,gpn=4,group=2", None),
        ("no record", None),
        ("", None),
    ],
)
def test_tp_record_reads_what_the_lua_filter_writes(
    comment: str, expected: TpRecord | None
) -> None:
    assert parse_tp_record(comment) == expected


# --------------------------------------------------------------------------- node order


def test_node_table_keeps_slurms_order() -> None:
    text = json.dumps({"nodes": [{"name": "node08"}, {"name": "node07"}, {"name": "node01"}]})
    assert parse_node_table(text) == ["node08", "node07", "node01"]
    assert parse_scontrol_nodes(text) == {"node01", "node07", "node08"}


def test_rank_order_follows_the_node_table() -> None:
    """24.11 block: the table is slurm.conf order; a sorted hostlist goes back to it."""
    table = [f"node{i:02d}" for i in range(8, 0, -1)]
    nodes = ["node01", "node03", "node05", "node06", "node07", "node08"]
    assert slurm_rank_order(nodes, table) == [
        "node08",
        "node07",
        "node06",
        "node05",
        "node03",
        "node01",
    ]
    assert slurm_rank_order(["x2", "node01", "x10"], table) == ["node01", "x2", "x10"]


# --------------------------------------------------------------------------- topology

# 24.11.5 and 26.05.5 print the same (26.05 folds the leaf hostlist: node[02,04-05,07]).
SHOW_TREE = """SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[02,04-05,07]
SwitchName=s2 Level=0 LinkSpeed=1 Nodes=node[01,03,06,08]
SwitchName=top Level=1 LinkSpeed=1 Nodes=node[01-08] Switches=s[1-2]
"""
SHOW_BLOCK = """BlockName=bA BlockIndex=0 Nodes=node[02,04,05,07] BlockSize=2
BlockName=bB BlockIndex=1 Nodes=node[01,03,06,08] BlockSize=2
AggregatedBlock=bA,bB BlockIndex=2 Nodes=node[01-08] BlockSize=4
"""


def test_show_topology_tree() -> None:
    tree = parse_show_topology(SHOW_TREE).tree
    assert tree is not None
    assert [(g.name, g.nodes) for g in tree.leaves] == [
        ("s1", ["node02", "node04", "node05", "node07"]),
        ("s2", ["node01", "node03", "node06", "node08"]),
    ]
    assert [(s.name, s.level, s.children) for s in tree.uppers] == [("top", 1, ["s1", "s2"])]
    assert tree.tops == ["top"]


def test_show_topology_blocks_skip_aggregates_and_keep_sizes() -> None:
    found = parse_show_topology(SHOW_BLOCK, "nvl")
    assert found.name == "nvl" and found.tree is None and found.blocks is not None
    assert [b.name for b in found.blocks.blocks] == ["bA", "bB"]
    assert found.blocks.block_sizes == [2, 4]


def test_show_topology_of_a_flat_topology_is_empty() -> None:
    """26.05 ``scontrol show topology <flat one>`` prints nothing."""
    found = parse_show_topology("", "none")
    assert (found.tree, found.blocks, found.kind) == (None, None, "flat")


# --------------------------------------------------------------------------- the edge


def fake_scontrol(tmp_path: Path, body: str) -> str:
    script = tmp_path / "scontrol"
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_scontrol_job_runs_the_command(tmp_path: Path) -> None:
    binary = fake_scontrol(tmp_path, f"echo '{jobs(JOB_2411)}'; echo \"$@\" > {tmp_path}/args")
    assert scontrol_job(Scontrol(binary), " 1 ").tp == 8
    assert (tmp_path / "args").read_text().split() == ["show", "job", "--json", "1"]


@pytest.mark.parametrize("job_id", ["", "-1", "1;rm", "--json", "abc"])
def test_scontrol_job_refuses_a_bad_id_before_running(tmp_path: Path, job_id: str) -> None:
    with pytest.raises(UsageError, match="invalid job id"):
        scontrol_job(Scontrol(fake_scontrol(tmp_path, "exit 99")), job_id)


NESTED = "[" * 100_000 + "]" * 100_000
DEEP = '{"jobs": ' + NESTED + "}"


def test_deeply_nested_scontrol_json_is_one_input_error(tmp_path: Path) -> None:
    """Deep nesting (a RecursionError, exit 70 once) is bad input, also inside a field no
    reader uses (the decoder walks it to skip it)."""
    with pytest.raises(InputError, match="show job --json` output: "):
        scontrol_job(Scontrol(fake_scontrol(tmp_path, f"cat <<'EOF'\n{DEEP}\nEOF")), "1")
    skipped = '{"jobs": [{"job_id": 1, "comment": ' + NESTED + "}]}"
    with pytest.raises(InputError, match="show jobs --json` output: JSON nested too deep"):
        parse_scontrol_jobs(skipped)
    with pytest.raises(InputError, match="show nodes --json` output: "):
        parse_node_table(DEEP.replace("jobs", "nodes"))


SHAPES = [
    '{"nodes": [1, 2]}',
    '{"nodes": {"name": "a"}}',
    '{"nodes": [{"name": ["a"]}]}',
    "[]",
]


@pytest.mark.parametrize("text", SHAPES)
def test_show_nodes_of_another_shape_is_one_input_error(text: str) -> None:
    """Typed decoding: any record of another shape, wherever it is, is one input error
    naming the command (``{"nodes": [1,2]}`` ended in exit 70); a reader checks the fields
    it reads (the node table only names)."""
    node = '{"nodes": [{"name": "a", "weight": 1, "state": {"x": 1}}]}'
    cases = [(text, parse) for parse in (parse_node_table, parse_node_states, parse_node_gpus)]
    cases += [(node, parse_node_states), (node, parse_node_gpus)]
    cases += [('{"nodes": [{"name": "a", "weight": 1e400}]}', parse_node_states)]
    for data, parse in cases:
        with pytest.raises(InputError, match=r"\Aunexpected `scontrol show nodes --json` output"):
            parse(data.encode())


@pytest.mark.parametrize(
    "text",
    [
        '{"jobs": [1, 2]}',
        '{"jobs": [{"job_id": 1, "job_resources": {"nodes": {"allocation": [7]}}}]}',
        '{"jobs": [{"job_id": 1, "gres_detail": "gpu:4"}]}',
        '{"jobs": [{"job_id": [1]}]}',
    ],
)
def test_show_jobs_of_another_shape_is_one_input_error(text: str) -> None:
    with pytest.raises(InputError, match=r"\Aunexpected `scontrol show jobs? --json` output"):
        parse_scontrol_jobs(text.encode())
    with pytest.raises(InputError, match=r"\Aunexpected `scontrol show jobs? --json` output"):
        parse_scontrol_job(text.encode(), "1")
    with pytest.raises(InputError, match="expected a whole number, got -1"):
        parse_scontrol_jobs(b'{"jobs": [{"job_id": 1, "node_count": {"number": -1}}]}')


def test_partition_of_another_shape_is_one_input_error() -> None:
    for text in ('{"partitions": [1]}', '{"partitions": [{"name": "p", "nodes": "n1"}]}'):
        with pytest.raises(InputError, match="unexpected `scontrol show partition --json`"):
            parse_partition_nodes(text.encode(), "p")


def test_bytes_that_are_not_utf8_decode_as_replacement(tmp_path: Path) -> None:
    """Slurm copies a reason's or comment's bytes into its JSON unchanged; a byte >= 0x80
    that is not UTF-8 (exit 70 once) reads as U+FFFD, the rest of the answer as it is."""
    nodes = (
        b'{"nodes": [{"name": "n1", "weight": 1, "reason": "disk \xff\xfe bad", '
        b'"gres": "gpu:4", "state": ["IDLE"], "partitions": ["p"]}]}'
    )
    (state,) = parse_node_states(nodes)
    assert state.reason == "disk \ufffd\ufffd bad"
    assert [n.gpus for n in parse_node_gpus(nodes)] == [4]
    script = tmp_path / "answer"
    script.write_bytes(
        b'{"jobs": [{"job_id": 1, "job_state": ["RUNNING"], "nodes": "n1", '
        b'"admin_comment": "\x80 topograph:tp=8", "gres_detail": ["gpu:8"]}]}'
    )
    job = scontrol_job(Scontrol(fake_scontrol(tmp_path, f"cat {script}")), "1")
    assert (job.nodes, job.gpus_per_node) == (("n1",), 8)
    binary = fake_scontrol(tmp_path, "printf 'bad \\377 byte\\n' >&2; exit 1")
    with pytest.raises(CollectError, match="failed \\(exit 1\\): bad \ufffd byte"):
        scontrol_job(Scontrol(binary), "1")


def test_scontrol_failure_is_one_collect_error(tmp_path: Path) -> None:
    binary = fake_scontrol(tmp_path, "echo 'slurm_load_jobs error: Unable to contact' >&2; exit 1")
    with pytest.raises(CollectError, match=r"show job failed \(exit 1\): slurm_load_jobs"):
        scontrol_job(Scontrol(binary), "1")
    with pytest.raises(CollectError, match="not found"):
        scontrol_job(Scontrol(os.fspath(tmp_path / "missing")), "1")


def test_scontrol_reads_large_answers_and_both_pipes_whole(tmp_path: Path) -> None:
    """stdout and stderr are each read to their end (a 3 MB answer, 200 kB of stderr, more
    than a pipe holds, written interleaved), the exit code and last stderr line as before."""
    binary = fake_scontrol(
        tmp_path,
        "i=0; while [ $i -lt 20 ]; do { head -c 10000 /dev/zero | tr '\\0' e; echo; } >&2; "
        "head -c 150000 /dev/zero | tr '\\0' o; i=$((i+1)); done; echo last >&2; exit $1",
    )
    assert Scontrol(binary).output(["0"]) == b"o" * 3_000_000
    with pytest.raises(CollectError, match=r"failed \(exit 3\): last$"):
        Scontrol(binary).output(["3"])


def test_scontrol_timeout_is_prompt_even_when_a_child_holds_the_pipes(tmp_path: Path) -> None:
    """A hung scontrol (or a wrapper whose own child hangs on to stdout) is killed after the
    timeout and refused at once, not waited for until the pipes close."""
    import time

    for hang in ("exec sleep 30", "sleep 30; echo never"):
        binary = fake_scontrol(tmp_path, hang)
        start = time.monotonic()
        with pytest.raises(CollectError, match=r"timed out after 0\.5s"):
            Scontrol(binary, timeout=0.5).output(["show", "jobs"])
        assert time.monotonic() - start < 5


def test_scontrol_topology_passes_the_name(tmp_path: Path) -> None:
    binary = fake_scontrol(tmp_path, f"echo \"$@\" > {tmp_path}/args; cat <<'EOF'\n{SHOW_BLOCK}EOF")
    assert scontrol_topology(Scontrol(binary), "nvl").kind == "block"
    assert (tmp_path / "args").read_text().split() == ["show", "topology", "nvl"]
    with pytest.raises(UsageError, match="invalid topology name"):
        scontrol_topology(Scontrol(binary), "-x")


# --------------------------------------------------------------------------- node states

# 24.11.5 and 26.05.5 (tests/integration/test_health_apply.py), trimmed: a node with an admin
# feature from slurm.conf plus ours, after `scontrol update … Weight=1001 AvailableFeatures=…`,
# and a node drained by `scontrol update … State=DRAIN Reason=…`.
NODE_STATES = {
    "nodes": [
        {
            "name": "node01",
            "weight": 1001,
            "features": ["admin_a", "topo_degraded", "topo_leaf_l1"],
            "active_features": ["admin_a", "topo_degraded", "topo_leaf_l1"],
            "state": ["IDLE"],
            "reason": "",
            "reason_set_by_user": "",
        },
        {
            "name": "node03",
            "weight": 1,
            "features": [],
            "active_features": [],
            "state": ["IDLE", "DRAIN"],
            "reason": "topograph: missing-rail",
            "reason_set_by_user": "root",
        },
    ]
}


def test_node_states_read_weight_features_state_and_reason() -> None:
    first, drained = parse_node_states(json.dumps(NODE_STATES))
    assert first == SlurmNode(
        "node01",
        1001,
        ("admin_a", "topo_degraded", "topo_leaf_l1"),
        ("admin_a", "topo_degraded", "topo_leaf_l1"),
        ("IDLE",),
        "",
    )
    assert drained.drained and drained.reason == "topograph: missing-rail"
    assert not first.drained


def test_node_states_take_comma_separated_features_and_refuse_other_shapes() -> None:
    entry = {"name": "n1", "weight": 1, "features": "a,b", "state": "IDLE"}
    (node,) = parse_node_states(json.dumps({"nodes": [entry]}))
    assert node.features == ("a", "b") and node.active_features == () and node.state == ("IDLE",)
    for bad in (
        {"name": "n1"},
        {"name": "n1", "weight": "x"},
        {"name": "n1", "weight": 1, "features": 3},
    ):
        with pytest.raises(InputError, match="scontrol show nodes --json"):
            parse_node_states(json.dumps({"nodes": [bad]}))
    with pytest.raises(InputError, match="scontrol show nodes --json"):
        parse_node_states("not json")


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_real_answers_decode_into_the_typed_records(release: str) -> None:
    """Slurm's own answers (tests/fixtures/real/scontrol, the Docker cluster's): every
    record decodes; the occupancy fields read as the capture's setup made them."""
    real = Path(__file__).parents[1] / "fixtures" / "real" / "scontrol"
    nodes = (real / f"scontrol-{release}-nodes.json").read_bytes()
    gpus = {n.name: (n.gpus, n.used, n.down) for n in parse_node_gpus(nodes)}
    assert gpus == {
        "node01": (4, 4, False), "node02": (4, 0, False),
        "node03": (4, 2, False), "node04": (4, 0, True),
    }  # fmt: skip
    queue = parse_scontrol_jobs((real / f"scontrol-{release}-jobs.json").read_bytes())
    shapes = [(j.job_id, j.state, j.nodes, j.node_count, j.segment) for j in queue]
    segment = 2 if release == "26.05" else None
    assert shapes == [
        ("1", "RUNNING", ("node01",), 1, None),
        ("2", "RUNNING", ("node03",), 1, None),
        ("3", "PENDING", (), 2, None),
        ("4", "PENDING", (), 4, segment),
    ]
    job = parse_scontrol_job((real / f"scontrol-{release}-job.json").read_bytes(), "2")
    assert (job.nodes, job.gpus_per_node) == (("node03",), 2)
    partition = (real / f"scontrol-{release}-partition.json").read_bytes()
    assert parse_partition_nodes(partition, "gpu") == ["node01", "node02", "node03", "node04"]
