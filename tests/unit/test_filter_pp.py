"""``--pp-size`` beside ``--tp-size``: the generated filters under real Lua 5.1 and 5.4 (lupa).

One model replica is tp x pp GPUs. The rules (README, "Job filters"): the job must be a whole
number of replicas; the fewest nodes that hold whole replicas, u = tp*pp / gcd(tp*pp, g), are
kept inside one base block (``--segment=u``) or leaf (``--switches``) when they fit, else only
the TP groups are (as without --pp-size), and the record says which. The same table runs
through job_submit.lua and cli_filter.lua, which must agree to the message.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.lua_fakes import (
    ERRORS,
    RUNTIMES,
    LuaFilter,
    Outcome,
    runtime_or_skip,
    tp_env,
)
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.filters import FilterFacts, PartitionFacts, render_filters

NEW = "25.11.2"  # job_submit.lua sets segment_size itself
OLD = "24.11.5"


def facts(version: str = NEW) -> FilterFacts:
    return FilterFacts(
        partitions=(
            PartitionFacts("blk4", "block", 4, base_block=4),
            PartitionFacts("blk8", "block", 4, base_block=8),
            PartitionFacts("tree", "tree", 8, leaf_size=4, max_leaves=3),
            PartitionFacts("flat", "flat", 8),
            PartitionFacts("dflt", "block", 4, base_block=8, default_tp=8),
        ),
        slurm_version=SlurmVersion.parse(version),
        default_partition="blk4",
    )


@functools.cache
def loaded(runtime: str, kind: str, version: str = NEW) -> LuaFilter:
    return LuaFilter(runtime, render_filters(facts(version))[kind])


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    return runtime_or_skip(str(request.param))


def submit(
    runtime: str,
    partition: str,
    nodes: int | None,
    tp: str | None,
    pp: str | None,
    version: str = NEW,
    **fields: Any,
) -> Outcome:
    job: dict[str, Any] = {"partition": partition, **fields}
    if nodes is not None:
        job.setdefault("min_nodes", nodes)
        job.setdefault("max_nodes", nodes)
    env = ["OTHER=1"]
    if pp is not None:
        env.insert(0, tp_env(pp, option="pp"))  # index 0: ipairs() would miss it
    if tp is not None:
        env.append(tp_env(tp))
    new = SlurmVersion.parse(version).can_set_segment_size
    out = loaded(runtime, "job_submit.lua", version).job_submit(job, env, segment_supported=new)
    assert "assoc_qos" not in out.reads
    return out


def cli(
    runtime: str, partition: str, nodes: int | None, tp: str | None, pp: str | None, **opts: str
) -> Outcome:
    options = {"partition": partition, **{k.replace("_", "-"): v for k, v in opts.items()}}
    if nodes is not None:
        options["nodes"] = str(nodes)
    out = loaded(runtime, "cli_filter.lua").cli(options, tp, pp=pp)
    assert out.exited is None, f"client would exit: {out.exited}"
    return out


R = "reject"
SEG, SW, NONE = "segment", "switches", "none"

#: (partition, nodes, tp, pp) -> (what, value, record or message fragment). blk4/blk8: 4 GPUs
#: per node, 4/8-node blocks; tree: 8 GPUs per node, 4-node leaves, 3 leaves; flat: 8 GPUs.
CASES: list[tuple[str, int | None, str | None, str, tuple[str, Any, str]]] = [
    # the replica fits a block: its nodes get one segment
    ("blk4", 4, "4", "2", (SEG, 2, "tp=4,gpn=4,group=1,pp=2,replica=2,unit=replica,segment=2")),
    ("blk4", 8, "8", "2", (SEG, 4, "tp=8,gpn=4,group=2,pp=2,replica=4,unit=replica,segment=4")),
    ("blk4", 8, "4", "4", (SEG, 4, "pp=4,replica=4,unit=replica,segment=4")),
    ("blk8", 16, "8", "4", (SEG, 8, "group=2,pp=4,replica=8,unit=replica,segment=8")),
    # tp x pp not a whole number of nodes: 3 nodes (12 GPUs) hold two 6-GPU replicas
    ("blk4", 6, "2", "3", (SEG, 3, "tp=2,gpn=4,group=1,pp=3,replica=3,unit=replica,segment=3")),
    # the replica is larger than a block: TP groups kept whole, as with --tp-size alone
    ("blk4", 8, "8", "4", (SEG, 2, "tp=8,gpn=4,group=2,pp=4,replica=8,unit=group,segment=2")),
    ("blk4", 8, "4", "8", (NONE, None, "tp=4,gpn=4,group=1,pp=8,replica=8,unit=group,src")),
    # replicas inside one node: nothing to place
    ("blk4", 3, "2", "2", (NONE, None, "tp=2,gpn=4,group=1,pp=2,replica=1,unit=replica,src")),
    ("blk4", None, "1", "4", (NONE, None, "pp=4,replica=1")),
    # --pp-size without --tp-size: tp = 1
    ("blk4", 4, None, "8", (SEG, 2, "tp=1,gpn=4,group=1,pp=8,replica=2,unit=replica,segment=2")),
    # tree: --switches for the job when its replicas fit one leaf (or its TP groups span nodes)
    ("tree", 4, "8", "2", (SW, "1", "tp=8,gpn=8,group=1,pp=2,replica=2,unit=replica,switches=1")),
    ("tree", 8, "4", "4", (SW, "2", "pp=4,replica=2,unit=replica,switches=2@300")),
    ("tree", 8, "8", "8", (NONE, None, "tp=8,gpn=8,group=1,pp=8,replica=8,unit=group,src")),
    ("tree", 8, "16", "4", (SW, "2", "group=2,pp=4,replica=8,unit=group,switches=2@300")),
    ("flat", 4, "8", "2", (NONE, None, "tp=8,gpn=8,group=1,pp=2,replica=2,src=user")),
    # rejected, with what would work
    (
        "blk4",
        4,
        "2",
        "3",
        (
            R,
            ERRORS["ESLURM_INVALID_NODE_COUNT"],
            "--tp-size=2 --pp-size=3 makes model replicas of 6 GPUs; -N 4 gives 16 GPUs "
            "(4 per node), not a whole number of replicas: use -N 3 or -N 6",
        ),
    ),
    ("blk4", 6, "8", "2", (R, ERRORS["ESLURM_INVALID_NODE_COUNT"], "use -N 4 or -N 8")),
    (
        "blk4",
        None,
        "8",
        "2",
        (
            R,
            ERRORS["ESLURM_INVALID_NODE_COUNT"],
            "--tp-size=8 --pp-size=2 makes model replicas of 16 GPUs: give the node count with "
            "-N (a multiple of 4, e.g. -N 4)",
        ),
    ),
    (
        "blk4",
        2,
        None,
        "3",
        (R, ERRORS["ESLURM_INVALID_NODE_COUNT"], "--pp-size=3 (--tp-size=1) makes model replicas"),
    ),
    ("tree", 3, "8", "2", (R, ERRORS["ESLURM_INVALID_NODE_COUNT"], "use -N 2 or -N 4")),
    ("flat", 3, "8", "2", (R, ERRORS["ESLURM_INVALID_NODE_COUNT"], "use -N 2 or -N 4")),
    ("blk4", 4, "8", "0", (R, ERRORS["ESLURM_INVALID_GRES"], "--pp-size must be a whole number")),
    ("blk4", 4, "8", "x", (R, ERRORS["ESLURM_INVALID_GRES"], "from 1 to 65536, got 'x'")),
    ("blk4", 4, "3", "2", (R, ERRORS["ESLURM_INVALID_GRES"], "--tp-size=3 does not divide")),
    (
        "blk4",
        8,
        "32",
        "2",
        (R, ERRORS["ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE"], "fits one block is 16"),
    ),
]


def case_id(case: tuple[Any, ...]) -> str:
    part, nodes, tp, pp, (what, _, _) = case
    return f"{part}-N{nodes}-tp{tp}-pp{pp}-{what}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_pp_rules(runtime: str, case: tuple[Any, ...]) -> None:
    part, nodes, tp, pp, (what, value, text) = case
    js = submit(runtime, part, nodes, tp, pp)
    cf = cli(runtime, part, nodes, tp, pp)
    if what == R:
        assert (js.rc, js.sets) == (value, {})
        [message] = js.messages("user")
        assert text in message
        assert (cf.rc, cf.sets, cf.messages("error")) == (-1, {}, [message])
        return
    assert js.rc == 0 and cf.rc == 0, (js.log, cf.log)
    record = js.sets["admin_comment"]
    assert record.startswith("topograph:tp=") and text in record, record
    assert record.endswith(",src=user")
    placed_js = {k: v for k, v in js.sets.items() if k != "admin_comment"}
    if what == SEG:
        assert placed_js == {"segment_size": value}
        assert cf.sets == {"segment": str(value)}
    elif what == SW:
        assert placed_js == {"req_switch": int(value), "wait4switch": 300}
        assert cf.sets == {"switches": f"{value}@00:05:00"}
    else:
        assert placed_js == {} and cf.sets == {}


def test_pp_on_old_slurm_records_the_segment_for_cli_filter(runtime: str) -> None:
    out = submit(runtime, "blk4", 4, "4", "2", version=OLD)
    assert out.rc == 0 and "segment_size" not in out.sets and "segment_size" not in out.reads
    assert out.sets["admin_comment"].endswith("unit=replica,segment=2,src=user")


def test_verbose_says_what_is_kept(runtime: str) -> None:
    out = cli(runtime, "blk4", 8, "8", "4", verbose="1")
    [info] = out.messages("info")
    assert info == (
        "topograph: --tp-size=8 --pp-size=4 on blk4: 4 GPUs/node, 2 node(s) per TP group, "
        "replicas of 32 GPUs in units of 8 node(s) (more than a block or leaf: only TP groups "
        "kept whole) -> --segment=2"
    )
    [fits] = cli(runtime, "blk4", 4, None, "8", verbose="1").messages("info")
    assert fits.startswith("topograph: --pp-size=8 (--tp-size=1) on blk4: ")
    assert fits.endswith("replicas of 8 GPUs in units of 2 node(s) -> --segment=2")


@pytest.mark.parametrize(
    ("segment", "result"),
    [
        ("4", None),
        ("8", None),
        ("1", "--segment=1 would split model replicas of 2 nodes (--tp-size=4 --pp-size=2)"),
        ("3", "--segment=3 would split model replicas of 2 nodes"),
    ],
)
def test_user_segment_must_hold_whole_replicas(
    runtime: str, segment: str, result: str | None
) -> None:
    js = submit(runtime, "blk8", 8, "4", "2", segment_size=int(segment))
    cf = cli(runtime, "blk8", 8, "4", "2", segment=segment)
    if result is None:
        assert js.rc == 0 and "segment_size" not in js.sets
        assert f"segment={segment}," in js.sets["admin_comment"]
        assert (cf.rc, cf.sets) == (0, {})
        return
    assert js.rc == ERRORS["ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE"]
    assert result in js.messages("user")[0]
    assert cf.messages("error") == js.messages("user")


def test_replica_over_a_block_lets_segments_of_tp_groups_through(runtime: str) -> None:
    out = submit(runtime, "blk4", 8, "8", "4", segment_size=4)
    assert out.rc == 0
    assert out.sets["admin_comment"].endswith("unit=group,segment=4,src=user")


def test_partitions_that_place_replicas_differently(runtime: str) -> None:
    out = submit(runtime, "blk4,blk8", 8, "8", "4")
    assert out.rc == ERRORS["ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE"]
    assert out.messages("user") == [
        "--tp-size=8 --pp-size=4 needs different placement on partitions blk4 and blk8: "
        "submit to one of them"
    ]
    assert submit(runtime, "blk4,blk8", 4, "4", "2").sets["segment_size"] == 2


def test_pp_without_tp_ignores_the_site_default(runtime: str) -> None:
    """A job that states its pipeline states its layout: tp = 1, not the partition's default."""
    out = submit(runtime, "dflt", 4, None, "2")
    assert out.rc == 0
    record = "topograph:tp=1,gpn=4,group=1,pp=2,replica=1,unit=replica,src=user"
    assert out.sets == {"admin_comment": record}
    assert submit(runtime, "dflt", 4, None, None).sets["segment_size"] == 2  # the default


def test_pp_unset_sentinels_and_other_plugins(runtime: str) -> None:
    filt = loaded(runtime, "cli_filter.lua")
    out = filt.cli({"nodes": "6"}, None, spank_unset=True)
    assert (out.rc, out.sets, out.log) == (0, {}, [])
    assert submit(runtime, "blk4", 3, None, None).sets == {}
    js = loaded(runtime, "job_submit.lua").job_submit(
        {"partition": "blk4", "min_nodes": 3, "max_nodes": 3},
        [tp_env("3", plugin="other", option="pp")],
        segment_supported=True,
    )
    assert (js.rc, js.sets) == (0, {})


# --------------------------------------------------------------------------------------------
# The record: old records parse, new ones round-trip, a newer record replaces an older one
# --------------------------------------------------------------------------------------------


def module(runtime: str) -> Any:
    lua = importlib.import_module(runtime).LuaRuntime()
    return lua, lua.execute(render_filters(facts())["topograph_tp.lua"])


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("topograph:tp=8,gpn=4,group=2,segment=2,src=user", {"tp": 8, "group": 2}),
        ("x topograph:tp=16,gpn=8,group=2,switches=1@300,src=default", {"tp": 16, "group": 2}),
        (
            "topograph:tp=8,gpn=4,group=2,pp=4,replica=8,unit=group,segment=2,src=user",
            {"tp": 8, "group": 2, "pp": 4, "replica": 8, "unit": "group"},
        ),
        (
            "topograph:tp=1,gpn=8,group=1,pp=2,replica=1,src=user",
            {"tp": 1, "group": 1, "pp": 2, "replica": 1},
        ),
        ("topograph:pp=4", None),
        ("ticket-42", None),
    ],
)
def test_parse_record(runtime: str, text: str, parsed: dict[str, Any] | None) -> None:
    _, m = module(runtime)
    rec = m.parse_record(text)
    if parsed is None:
        assert rec is None
        return
    assert {str(k): (int(v) if isinstance(v, float) else v) for k, v in rec.items()} == parsed


@pytest.mark.parametrize("case", [c for c in CASES if c[4][0] != R], ids=case_id)
def test_record_round_trip(runtime: str, case: tuple[Any, ...]) -> None:
    part, nodes, tp, pp, _ = case
    lua, m = module(runtime)
    req = {"partition": part, "pp": pp, **({"tp": tp} if tp else {})}
    if nodes is not None:
        req["nodes"] = nodes
    d = m.decide(lua.table_from(req))
    rec = m.record(d)
    back = m.parse_record(m.merge_record("ticket-42 topograph:tp=4,gpn=4,group=1,src=user", rec))
    assert (back.tp, back.group, back.pp, back.replica, back.unit) == (
        d.tp,
        d.group_nodes,
        d.pp,
        d.replica_nodes,
        d.unit,
    )
    assert m.merge_record("ticket-42 topograph:tp=4,gpn=4,group=1,src=user", rec) == (
        "ticket-42 " + rec
    )


# --------------------------------------------------------------------------------------------
# slurm_job_modify: a --pp-size job stays a whole number of replicas
# --------------------------------------------------------------------------------------------

FITS = "topograph:tp=8,gpn=4,group=2,pp=2,replica=4,unit=replica,segment=4,src=user"
SPLIT = "topograph:tp=8,gpn=4,group=2,pp=4,replica=8,unit=group,segment=2,src=user"
INNODE = "topograph:tp=4,gpn=4,group=1,pp=8,replica=8,unit=group,src=user"


@pytest.mark.parametrize(
    ("changes", "record", "refused"),
    [
        (
            {"min_nodes": 6, "max_nodes": 6},
            FITS,
            "NumNodes=6 is not a multiple of 4: use NumNodes=4 or NumNodes=8",
        ),
        ({"min_nodes": 2}, FITS, "NumNodes=2 is not a multiple of 4"),  # TP groups, not replicas
        ({"min_nodes": 8}, FITS, None),
        ({"segment_size": 2}, FITS, "SegmentSize=2 would split them: use SegmentSize=4"),
        ({"segment_size": 8}, FITS, None),
        ({"segment_size": 2}, SPLIT, None),  # the replica never fitted: TP groups whole
        ({"segment_size": 1}, SPLIT, "use SegmentSize=2"),
        ({"min_nodes": 4}, INNODE, "NumNodes=4 is not a multiple of 8"),
        ({"segment_size": 1}, INNODE, None),
        ({"min_nodes": 3}, "topograph:tp=4,gpn=4,group=1,pp=1,replica=1,src=user", None),
    ],
)
def test_job_modify_keeps_whole_replicas(
    runtime: str, changes: dict[str, int], record: str, refused: str | None
) -> None:
    filt = loaded(runtime, "job_submit.lua")
    out = filt.job_modify(changes, record, uid=1000, segment_supported=True)
    if refused is None:
        assert out.rc == 0 and not out.messages("user"), out.log
        return
    assert out.rc == ERRORS["ESLURM_INVALID_NODE_COUNT"]
    [message] = out.messages("user")
    pp = record.split("pp=")[1].split(",")[0]
    replica = record.split("replica=")[1].split(",")[0]
    assert message.startswith(
        f"this job was submitted with --tp-size={record.split('tp=')[1].split(',')[0]} "
        f"--pp-size={pp} ({replica} nodes per model replica unit); "
    )
    assert refused in message


# --------------------------------------------------------------------------------------------
# Fuzzing: accepted jobs are whole replicas and their segments hold whole units; both
# runtimes and both filters agree
# --------------------------------------------------------------------------------------------

sizes = st.one_of(st.none(), st.integers(-1, 40).map(str), st.sampled_from(["", "2.0", "x"]))


@given(
    part=st.sampled_from(["blk4", "blk8", "tree", "flat", "blk4,blk8"]),
    nodes=st.one_of(st.none(), st.integers(1, 40)),
    tp=sizes,
    pp=sizes,
    segment=st.one_of(st.none(), st.integers(1, 16)),
)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzz_pp(
    part: str, nodes: int | None, tp: str | None, pp: str | None, segment: int | None
) -> None:
    results = {}
    for rt in RUNTIMES:
        extra = {} if segment is None else {"segment_size": segment}
        js = submit(rt, part, nodes, tp, pp, **extra)
        opts = {} if segment is None else {"segment": str(segment)}
        cf = cli(rt, part, nodes, tp, pp, **opts)
        assert not js.messages("error")  # no internal fault
        assert not any("internal" in m for m in cf.messages("error"))
        assert (js.rc == 0) == (cf.rc == 0), (js.log, cf.log)
        if js.rc != 0:
            assert js.sets == {} and js.messages("user") == cf.messages("error")
        elif pp is not None and "admin_comment" in js.sets:
            first = part.split(",")[0]
            g = facts().partition(first).gpus_per_node
            replica = int(tp or 1) * int(pp)
            n = nodes or 1
            assert (n * g) % replica == 0 or (replica < g and g % replica == 0)
            seg = js.sets.get("segment_size") or segment
            if seg is not None and "segment=" in js.sets["admin_comment"]:
                rec = js.sets["admin_comment"]
                unit = int(rec.split("replica=")[1].split(",")[0])
                group = int(rec.split("group=")[1].split(",")[0])
                kept = unit if "unit=replica" in rec else group
                assert int(seg) % kept == 0 and n % int(seg) == 0
        results[rt] = (js.rc, sorted(js.sets.items()), js.log, cf.rc, sorted(cf.sets.items()))
    assert results["lupa.lua51"] == results["lupa.lua54"]
