"""``occupancy --keep-whole``/``--apply``/``--reset``: the Weight offset that keeps whole free
units whole (analysis/occupancy/steer.py), its combination with health's, and the command.

The rule's cluster: blocks b1 (n01-n04), b2 (n05-n08), b3 (n09-n12); a job holds n01 (b1
partly used), b2 and b3 are whole free. With a keep offset of 100 the nodes of b2 and b3 get
Weight own+100 and the ``topo_keep`` feature; b1's stay at their own, so Slurm (which picks
the block whose lowest-weight node is lowest: eval_nodes_block()) puts a small job into b1.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.support.scontrol import Answer, ReplayScontrol
from tests.unit.test_occupancy import TOPOLOGY, jobs, nodes
from topograph_slurm.analysis.health.proposal import HealthPolicy
from topograph_slurm.analysis.health.proposal import plan as health_plan
from topograph_slurm.analysis.occupancy.steer import KeepPolicy, keep_changes, whole_free_units
from topograph_slurm.analysis.placement.span import fabric_map
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.health import DEGRADED, SlurmNode, Verdict
from topograph_slurm.model.occupancy import NodeGpus
from topograph_slurm.model.result import Block, BlockTopology

NAMES = [f"n{i:02d}" for i in range(1, 13)]
FMAP = fabric_map(
    None, BlockTopology([Block(f"b{b + 1}", NAMES[b * 4 : b * 4 + 4]) for b in range(3)], [4])
)
POLICY = KeepPolicy("topo_", 100)


def gpus(held: tuple[str, ...] = ("n01",), down: tuple[str, ...] = ()) -> list[NodeGpus]:
    return [NodeGpus(name, 4, 0, down=name in down, allocated=name in held) for name in NAMES]


def slurm(weight: int = 1, **features: tuple[str, ...]) -> list[SlurmNode]:
    return [
        SlurmNode(name, weight, features.get(name, ()), features.get(name, ())) for name in NAMES
    ]


def weights(changes: list, current: list[SlurmNode]) -> dict[str, int]:
    was = {node.name: node.weight for node in current}
    return {c.node: c.weight if c.weight is not None else was[c.node] for c in changes}


def test_whole_free_units_are_those_no_job_holds_any_of_and_with_every_node_up() -> None:
    assert whole_free_units(FMAP, gpus()) == {"b2", "b3"}
    assert whole_free_units(FMAP, gpus(held=(), down=("n12",))) == {"b1", "b2"}
    # a CPU-only job (no GPU busy, the node MIXED) breaks a unit too
    assert whole_free_units(FMAP, gpus(held=("n05",))) == {"b1", "b3"}


def test_the_nodes_of_whole_free_units_get_the_offset_and_the_mark() -> None:
    current = slurm(weight=10)
    changes = keep_changes(FMAP, gpus(), current, POLICY)
    got = weights(changes, current)
    assert {got[n] for n in NAMES[:4]} == {10} and {got[n] for n in NAMES[4:]} == {110}
    assert all(c.features is None for c in changes[:4])
    assert all(c.features == ("topo_keep",) for c in changes[4:])


def test_a_second_run_changes_nothing_and_a_unit_taken_since_loses_the_offset() -> None:
    marked = {name: ("admin", "topo_keep") for name in NAMES[4:]}
    current = [
        SlurmNode(n.name, 110 if n.name in marked else 10, n.features, n.active_features)
        for n in slurm(**marked)
    ]
    assert not any(c.changes for c in keep_changes(FMAP, gpus(), current, POLICY))
    taken = keep_changes(FMAP, gpus(held=("n01", "n05")), current, POLICY)
    by_node = {c.node: c for c in taken}
    assert by_node["n05"].weight == 10 and by_node["n05"].features == ("admin",)
    assert by_node["n09"].weight is None and by_node["n09"].features is None


def test_reset_takes_every_offset_off_and_leaves_the_admins_weight_and_features() -> None:
    marked = {name: ("admin", "topo_keep") for name in NAMES[4:]}
    current = [SlurmNode(n.name, 7 + 100 * bool(n.features), n.features) for n in slurm(**marked)]
    changes = keep_changes(FMAP, gpus(), current, POLICY, reset=True)
    assert set(weights(changes, current).values()) == {7}
    assert {c.features for c in changes if c.features is not None} == {("admin",)}


def test_health_and_keep_offsets_add_and_a_degraded_node_stays_last() -> None:
    """n02 degraded in partly used b1: health adds 1000 to its own; keep adds 100 to b2/b3;
    each run takes off only its own, whichever runs first."""
    current = slurm()
    kept = keep_changes(FMAP, gpus(), current, POLICY)
    after_keep = [
        SlurmNode(c.node, c.weight or c.was.weight, c.features or (), c.active_features or ())
        for c in kept
    ]
    verdicts = {name: Verdict(name, DEGRADED if name == "n02" else "healthy") for name in NAMES}
    found = health_plan(verdicts, {}, after_keep, HealthPolicy("topo_", 1000))
    final = weights(found.changes, after_keep)
    assert final["n01"] == 1 and final["n02"] == 1001 and final["n05"] == 101
    assert max(final, key=final.__getitem__) == "n02"
    # health keeps keep's mark, keep keeps health's
    by_node = {c.node: c for c in found.changes}
    assert "topo_keep" in (by_node["n05"].features or ())
    labels = [c.features or c.was.features for c in found.changes]
    again = [
        SlurmNode(c.node, final[c.node], features, features)
        for c, features in zip(found.changes, labels, strict=True)
    ]
    assert not any(c.changes for c in keep_changes(FMAP, gpus(), again, POLICY))


def _slurm_nodes() -> list[dict[str, object]]:
    """test_occupancy's cluster (b0 partly used, b1 partly used, b2 with node12 drained) with
    node05-08 freed: b1 is whole free."""
    found = nodes()
    found[4] = found[5]
    for i, entry in enumerate(found):
        entry = dict(entry, name=f"node{i + 1:02d}") if i == 4 else entry
        entry["weight"] = 1
        entry["features"] = []
        entry["active_features"] = []
        found[i] = entry
    return found


def run(tmp_path: Path, *args: str, updates: tuple[str, ...] = ()) -> tuple[int, str, str]:
    answers = {
        "show nodes --json": Answer(json.dumps({"nodes": _slurm_nodes()})),
        "show jobs --json": Answer(json.dumps({"jobs": jobs()[1:]})),
    } | {line: Answer("") for line in updates}
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    config = tmp_path / "c.yaml"
    config.write_text(f"scontrol: {scontrol.path}\n")
    topology = tmp_path / "topology.conf"
    topology.write_text(TOPOLOGY)
    result = CliRunner().invoke(
        main, ["--config", str(config), "occupancy", "--topology", str(topology), *args]
    )
    calls = "\n".join(c for c in scontrol.calls if c.startswith("update"))
    return result.exit_code, result.stdout, calls


LINE = "update NodeName=node[05-08] Weight=101 AvailableFeatures=topo_keep ActiveFeatures=topo_keep"
PRINTED = "scontrol " + LINE.replace("node[05-08]", "'node[05-08]'")


def test_keep_whole_prints_the_lines_and_exits_1_while_they_are_pending(tmp_path: Path) -> None:
    code, out, calls = run(tmp_path, "--keep-whole")
    assert code == Exit.DIFFERS and calls == ""
    assert out.endswith(
        "Keep whole units free (Weight +100 on every node of a whole free unit, off "
        f"elsewhere): 1 command(s)\n{PRINTED}\n"
    )


def test_apply_runs_exactly_the_printed_lines(tmp_path: Path) -> None:
    code, out, calls = run(tmp_path, "--apply", "--json", updates=(LINE,))
    assert code == Exit.OK and calls == LINE
    assert json.loads(out)["keep"] == {"reset": False, "weight": 100, "commands": [PRINTED]}


def test_a_keep_weight_not_below_healths_is_refused_before_anything_runs(tmp_path: Path) -> None:
    code, _, calls = run(tmp_path, "--apply", "--keep-weight", "1000")
    assert code == Exit.CONFIG and calls == ""
