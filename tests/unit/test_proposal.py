"""Health proposals against what Slurm holds: changes only where a value differs, undo when
healthy again, an admin's features and drains left alone; and the scontrol lines rendered."""

from __future__ import annotations

import shlex

import pytest

from topograph_slurm.analysis.health.proposal import (
    MAX_WEIGHT,
    REASON_PREFIX,
    HealthPolicy,
    plan,
)
from topograph_slurm.model.health import (
    DEGRADED,
    DRAIN,
    HEALTHY,
    UNKNOWN,
    NodeLabels,
    SlurmNode,
    Verdict,
)
from topograph_slurm.model.result import Finding
from topograph_slurm.render.environment import environment
from topograph_slurm.render.health import plan_data, render_commands, render_plan

POLICY = HealthPolicy()
LABELS = NodeLabels("leaf1", "su1")
OURS_OK = ("topo_ok", "topo_leaf_leaf1", "topo_block_su1")
OURS_DEGRADED = ("topo_degraded", "topo_leaf_leaf1", "topo_block_su1")
OURS_DRAIN = ("topo_drain", "topo_leaf_leaf1", "topo_block_su1")
SLOW = Finding("degraded-link", "n1 mlx5_0/1 <-> leaf1/1", "runs at 1xNDR", nodes=("n1",))
LOST = Finding("missing-rail", "n1", "1 connected HCAs, peers have 2")


def node(weight: int = 1, features: tuple[str, ...] = (), **kw: object) -> SlurmNode:
    active = kw.pop("active", features)
    return SlurmNode("n1", weight, features, active, **kw)  # type: ignore[arg-type]


def change(current: SlurmNode, severity: str, *found: Finding, policy: HealthPolicy = POLICY):
    verdict = Verdict("n1", severity, found)
    (result,) = plan({"n1": verdict}, {"n1": LABELS}, [current], policy).changes
    return result


def test_a_degraded_node_gets_the_weight_offset_and_its_features() -> None:
    c = change(node(5, ("admin_a",)), DEGRADED, SLOW)
    assert c.weight == 1005
    assert c.features == ("admin_a", *OURS_DEGRADED) and c.active_features == c.features
    assert c.drain_reason is None and not c.resume


def test_the_offset_stops_at_slurms_largest_weight() -> None:
    """A node weighted near 0xfffffff0 by its admin once got a Weight slurmctld refuses, so
    every run failed with exit 10."""
    assert change(node(MAX_WEIGHT - 10), DEGRADED, SLOW).weight == MAX_WEIGHT
    assert change(node(MAX_WEIGHT), DEGRADED, SLOW).weight is None  # already there


def test_a_drain_worthy_node_is_drained_with_our_reason_and_weighted() -> None:
    c = change(node(), DRAIN, SLOW, LOST)
    assert c.drain_reason == f"{REASON_PREFIX} degraded-link, missing-rail"
    assert c.weight == 1001 and c.features == OURS_DRAIN


def test_nothing_changes_when_slurm_already_holds_the_verdict() -> None:
    held = node(1005, ("admin_a", *OURS_DEGRADED))
    assert not change(held, DEGRADED, SLOW).changes
    reordered = node(1005, tuple(reversed(("admin_a", *OURS_DEGRADED))))
    assert not change(reordered, DEGRADED, SLOW).changes  # Slurm's order is not a change
    drained = node(
        1001, OURS_DRAIN, state=("IDLE", "DRAIN"), reason="topograph: degraded-link, missing-rail"
    )
    assert not change(drained, DRAIN, SLOW, LOST).changes


def test_health_leaves_the_pools_features_alone() -> None:
    held = node(1, ("admin_a", "topo_pool_decode", *OURS_OK))
    assert not change(held, HEALTHY).changes
    c = change(node(1, ("topo_pool_prefill", "topo_ok")), DEGRADED, SLOW)
    assert c.features == ("topo_pool_prefill", *OURS_DEGRADED)


def test_healthy_again_undoes_weight_features_and_our_drain() -> None:
    held = node(1005, ("admin_a", *OURS_DRAIN), state=("IDLE", "DRAIN"), reason="topograph: x")
    c = change(held, HEALTHY)
    assert c.weight == 5 and c.features == ("admin_a", *OURS_OK) and c.resume


def test_after_a_reconfigure_reset_the_offset_is_applied_again_not_twice() -> None:
    # reconfigure put slurm.conf's weight and features back: no mark, so 5 is the own weight
    c = change(node(5, ("admin_a",)), DEGRADED, SLOW)
    assert c.weight == 1005
    # a leaf change alone re-labels without touching the weight
    moved = change(node(1005, ("topo_degraded", "topo_leaf_old", "topo_block_su1")), DEGRADED)
    assert moved.weight is None and moved.features == OURS_DEGRADED


def test_an_admins_drain_is_never_resumed_or_overwritten() -> None:
    admin = node(state=("IDLE", "DRAIN"), reason="bad DIMM")
    assert not change(admin, HEALTHY).resume
    drained = change(admin, DRAIN, LOST)
    assert drained.drain_reason is None and "bad DIMM" in drained.note


def test_a_node_not_registered_since_a_restart_is_resumed_later() -> None:
    held = node(1001, OURS_DRAIN, state=("UNKNOWN", "DRAIN"), reason="topograph: missing-rail")
    c = change(held, HEALTHY)
    assert not c.resume and "resumed on a later run" in c.note
    assert c.weight == 1  # the rest is done now


def test_our_drain_with_new_causes_gets_the_new_reason() -> None:
    held = node(1001, OURS_DRAIN, state=("IDLE", "DRAIN"), reason="topograph: fabric-status")
    assert change(held, DRAIN, LOST).drain_reason == "topograph: missing-rail"


def test_no_drain_policy_weights_only_and_resumes_our_old_drain() -> None:
    policy = HealthPolicy(drain=False)
    assert change(node(), DRAIN, LOST, policy=policy).drain_reason is None
    held = node(1001, OURS_DRAIN, state=("IDLE", "DRAIN"), reason="topograph: missing-rail")
    assert change(held, DRAIN, LOST, policy=policy).resume


def test_active_features_keep_their_own_admin_part() -> None:
    c = change(node(features=("knl", "a2a", "quad"), active=("knl", "quad")), HEALTHY)
    assert c.features == ("knl", "a2a", "quad", *OURS_OK)
    assert c.active_features == ("knl", "quad", *OURS_OK)


def test_a_custom_prefix_and_weight() -> None:
    c = change(node(3, ("topo_ok",)), DEGRADED, SLOW, policy=HealthPolicy("fab_", 50))
    assert c.weight == 53
    assert c.features == ("topo_ok", "fab_degraded", "fab_leaf_leaf1", "fab_block_su1")


def test_unjudged_and_unknown_nodes_are_left_as_they_are() -> None:
    result = plan(
        {"n9": Verdict("n9", DEGRADED, (SLOW,)), "n2": Verdict("n2", UNKNOWN, (LOST,))},
        {},
        [node(), SlurmNode("n2", 7, ("topo_degraded",))],
        POLICY,
    )
    assert [c.node for c in result.changes] == ["n1", "n2"]
    assert not any(c.changes for c in result.changes)
    assert "not in the fabric sweep" in result.changes[0].note
    assert [v.node for v in result.not_in_slurm] == ["n9"]


# --------------------------------------------------------------------------- rendering


@pytest.fixture(scope="module")
def env():  # type: ignore[no-untyped-def]
    return environment()


def test_commands_are_exact_scontrol_lines_a_shell_splits_right(env) -> None:  # type: ignore[no-untyped-def]
    verdicts = {
        "n1": Verdict("n1", DRAIN, (LOST,)),
        "n2": Verdict("n2", HEALTHY),
        "n3": Verdict("n3", HEALTHY),
    }
    current = [
        node(),
        SlurmNode("n2", 1001, OURS_DRAIN, OURS_DRAIN, ("IDLE", "DRAIN"), "topograph: x"),
        SlurmNode("n3", 1, OURS_OK, OURS_OK),
    ]
    found = plan(verdicts, {"n1": LABELS, "n2": LABELS, "n3": LABELS}, current, POLICY)
    lines = render_commands(env, found)
    features = ",".join(OURS_DRAIN)
    ok = ",".join(OURS_OK)
    assert lines == [
        f"scontrol update NodeName=n1 Weight=1001 AvailableFeatures={features} "
        f"ActiveFeatures={features}",
        f"scontrol update NodeName=n2 Weight=1 AvailableFeatures={ok} ActiveFeatures={ok}",
        "scontrol update NodeName=n1 State=DRAIN Reason='topograph: missing-rail'",
        "scontrol update NodeName=n2 State=RESUME",
    ]
    assert shlex.split(lines[2])[-1] == "Reason=topograph: missing-rail"
    text = render_plan(env, found, lines, "text")
    assert "Nodes in Slurm: 3: 2 healthy, 0 degraded, 1 drain-worthy, 0 not judged." in text
    assert "n3 " not in text  # healthy and unchanged: counted, not listed
    assert "n1               drain     1 -> 1001     drain   missing-rail" in text
    data = plan_data(found, lines)
    assert data["summary"]["changing"] == 2 and data["commands"] == lines
    assert data["nodes"][1]["action"] == "resume"


def test_nodes_with_the_same_change_share_one_command(env) -> None:  # type: ignore[no-untyped-def]
    names = ["n1", "n2", "n3", "n10"]
    verdicts = {n: Verdict(n, DRAIN if n != "n2" else HEALTHY, (LOST,)) for n in names}
    current = [SlurmNode(n, 1) for n in names]
    lines = render_commands(env, plan(verdicts, {}, current, POLICY))
    assert lines == [
        "scontrol update NodeName='n[1,3,10]' Weight=1001 AvailableFeatures=topo_drain "
        "ActiveFeatures=topo_drain",
        "scontrol update NodeName=n2 AvailableFeatures=topo_ok ActiveFeatures=topo_ok",
        "scontrol update NodeName='n[1,3,10]' State=DRAIN Reason='topograph: missing-rail'",
    ]


def test_a_name_with_shell_characters_stays_one_word(env) -> None:  # type: ignore[no-untyped-def]
    current = SlurmNode("n1", 1, ("a b;rm",))
    found = plan({"n1": Verdict("n1", HEALTHY)}, {}, [current], POLICY)
    (line,) = render_commands(env, found)
    assert shlex.split(line)[3] == "AvailableFeatures=a b;rm,topo_ok"
