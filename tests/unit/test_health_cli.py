"""`topograph-slurm health` end to end on a simulated fabric with planted faults, against a
stand-in ``scontrol`` that prints the node JSON shape 24.11/26.05 print (see
test_slurm_sources.NODE_STATES) and records every ``update`` it is asked for."""

from __future__ import annotations

import gc
import json
import os
import shlex
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.analysis_watch import watch_analysis
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit

#: 8 nodes in 2 units; node0001's first cable at 1x (degraded); node0006's second rail moved.
SIM = "nodes=8,gpus=4,rails=2,su=4,tiers=2,prefix=node,degraded=1,disagree=node0006"
NODES = [f"node{i:04d}" for i in range(1, 9)]


def slurm_node(name: str, **kw: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": name,
        "weight": 1,
        "features": [],
        "active_features": [],
        "state": ["IDLE"],
        "reason": "",
    }
    return entry | kw


@pytest.fixture
def slurm(tmp_path: Path) -> Path:
    return fake_scontrol(tmp_path)


def fake_scontrol(tmp_path: Path) -> Path:
    """A directory with ``scontrol`` (shows nodes.json, logs updates to updates.log, fails an
    update of a node named in refuse) and nodes.json of 8 plain nodes plus a login node."""
    (tmp_path / "nodes.json").write_text(
        json.dumps({"nodes": [slurm_node(n) for n in [*NODES, "login1"]]})
    )
    script = tmp_path / "scontrol"
    script.write_text(
        f"""#!/bin/sh
cd {tmp_path}
if [ "$1" = --version ]; then echo 'slurm 24.11.5'; exit 0; fi
if [ "$1" = show ]; then
  if [ -e show-fails ]; then
    echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1
  fi
  cat nodes.json; exit 0
fi
echo "$@" >> updates.log
if [ -e refuse ] && [ "$2" = "NodeName=$(cat refuse)" ]; then
  echo 'slurm_update error: Invalid node state specified' >&2; exit 1
fi
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def run(slurm: Path, *args: str, config: str = os.devnull) -> Result:
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    return CliRunner().invoke(main, ["--config", config, "health", "--sim", SIM, *args], env=env)


def updates(slurm: Path) -> list[str]:
    log = slurm / "updates.log"
    return log.read_text().splitlines() if log.exists() else []


def one_error(result: Result, code: int, fragment: str) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topograph-slurm: error: "), result.stderr
    assert fragment in lines[0]


def test_dry_run_prints_verdicts_and_commands_and_exits_1(slurm: Path) -> None:
    result = run(slurm)
    assert result.exit_code == Exit.DIFFERS, result.output
    out = result.stdout
    assert "Nodes in Slurm: 9: 6 healthy, 2 degraded, 0 drain-worthy, 1 not judged." in out
    assert "node0001         degraded  1 -> 1001     -       degraded-link" in out
    assert "node0006         degraded  1 -> 1001     -       rail-disagreement" in out
    assert "login1           unknown" in out and "not in the fabric sweep" in out
    assert "Commands (4):" in out  # nodes with the same change share one
    assert "scontrol update NodeName='node[0002-0004]' AvailableFeatures=topo_ok," in out
    # node0006's rails split 1:1: it stays in its own unit, with its first rail
    assert (
        "scontrol update NodeName=node0006 Weight=1001 AvailableFeatures=topo_degraded,"
        "topo_leaf_leaf-su002-r0,topo_block_leaf-su002-r0 ActiveFeatures=topo_degraded,"
        "topo_leaf_leaf-su002-r0,topo_block_leaf-su002-r0"
    ) in out
    assert updates(slurm) == []


def test_apply_runs_exactly_the_printed_commands_then_nothing_is_pending(slurm: Path) -> None:
    dry = json.loads(run(slurm, "--json").stdout)
    result = run(slurm, "--apply")
    assert result.exit_code == Exit.OK, result.output
    ran = updates(slurm)
    assert [["scontrol", *line.split()] for line in ran] == [
        shlex.split(line) for line in dry["commands"]
    ]
    assert result.stderr.count("applied: scontrol update") == 4
    assert "NodeName=node[0002-0004] AvailableFeatures=topo_ok," in ran[1]
    # Slurm now holds what was applied: the next dry run proposes nothing
    held = {
        row["node"]: slurm_node(
            row["node"],
            weight=row["weight"]["new"] or row["weight"]["now"],
            features=row["features"]["new"] or [],
            active_features=row["active_features"]["new"] or [],
        )
        for row in dry["nodes"]
    }
    (slurm / "nodes.json").write_text(json.dumps({"nodes": list(held.values())}))
    again = run(slurm)
    assert again.exit_code == Exit.OK, again.output
    assert "Commands: none (Slurm already holds every verdict)." in again.stdout


def test_json_lists_every_node_with_its_verdict_and_causes(slurm: Path) -> None:
    data = json.loads(run(slurm, "--json").stdout)
    assert data["summary"] == {
        "healthy": 6,
        "unknown": 1,
        "degraded": 2,
        "drain": 0,
        "nodes": 9,
        "changing": 8,
    }
    first = next(row for row in data["nodes"] if row["node"] == "node0001")
    assert first["verdict"] == "degraded" and first["weight"] == {"now": 1, "new": 1001}
    assert [f["kind"] for f in first["findings"]] == ["degraded-link"]
    assert data["not_per_node"] == []  # two full units of 4: the base is the unit size


def test_an_admin_drain_and_features_are_kept(slurm: Path) -> None:
    nodes = [slurm_node(n) for n in NODES]
    nodes[1] = slurm_node("node0002", features=["bigmem"], active_features=["bigmem"])
    nodes[2] = slurm_node("node0003", state=["IDLE", "DRAIN"], reason="bad DIMM")
    (slurm / "nodes.json").write_text(json.dumps({"nodes": nodes}))
    assert run(slurm, "--apply").exit_code == Exit.OK
    ran = updates(slurm)
    assert any("NodeName=node0002 AvailableFeatures=bigmem,topo_ok," in line for line in ran), ran
    assert not any("State=RESUME" in line for line in ran)


def test_a_refused_update_is_one_line_in_slurms_words_and_the_rest_still_runs(
    slurm: Path,
) -> None:
    (slurm / "refuse").write_text("node[0002-0004]")
    result = run(slurm, "--apply")
    assert result.exit_code == Exit.APPLY, result.output
    error = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(error) == 1 and "Invalid node state specified" in error[0]
    assert "(1 of 4 commands failed)" in error[0]
    assert len(updates(slurm)) == 4


def test_slurm_unreachable_is_a_collect_error(slurm: Path) -> None:
    (slurm / "show-fails").touch()
    one_error(run(slurm), Exit.COLLECT, "Unable to contact slurm controller")
    (slurm / "scontrol").unlink()
    one_error(run(slurm), Exit.COLLECT, "scontrol not found")


def test_a_hostlist_dry_run_proposes_without_scontrol(slurm: Path) -> None:
    """Issue 24: a laptop or CI runner without slurm-client previews from a hostlist; Slurm's
    current values are unknown and the commands start from its defaults. --apply still needs
    scontrol, and says so."""
    (slurm / "scontrol").unlink()
    result = run(slurm, "--slurm-nodes", "node[0001-0008]")
    assert result.exit_code == Exit.DIFFERS, result.output
    out = result.stdout
    assert "Slurm not asked (scontrol not found): current values unknown (?)" in out
    assert "Nodes in --slurm-nodes: 8: 6 healthy, 2 degraded" in out
    assert "node0001         degraded  ? -> 1001     -       degraded-link" in out
    assert "Healthy, only their topology labels change (6): node[0002-0005,0007-0008]" in out
    assert "scontrol update NodeName=node0001 Weight=1001 AvailableFeatures=topo_degraded," in out
    data = json.loads(run(slurm, "--slurm-nodes", "node[0001-0008]", "--json").stdout)
    assert data["slurm_asked"] is False
    assert data["nodes"][0]["weight"] == {"now": None, "new": 1001}
    assert data["nodes"][0]["state"] == {"now": None, "reason": None}
    applied = run(slurm, "--slurm-nodes", "node[0001-0008]", "--apply")
    one_error(applied, Exit.COLLECT, "scontrol not found: health --apply needs slurm-client")


def test_bad_values_are_refused_before_anything_runs(slurm: Path, tmp_path: Path) -> None:
    one_error(run(slurm, "--feature-prefix", "1x"), Exit.USAGE, "--feature-prefix")
    one_error(run(slurm, "--degraded-weight", "0"), Exit.USAGE, "--degraded-weight")
    config = tmp_path / "config.yaml"
    config.write_text("health_weight: -3\n")
    one_error(run(slurm, config=str(config)), Exit.CONFIG, "health_weight")
    config.write_text("health_feature_prefix: 'a b'\n")
    one_error(run(slurm, config=str(config)), Exit.CONFIG, "health_feature_prefix")
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "health", "--ibnetdiscover", str(tmp_path / "absent")]
    )
    one_error(result, Exit.INPUT, "cannot read")
    assert updates(slurm) == []


def test_a_custom_prefix_and_weight_from_flags(slurm: Path) -> None:
    result = run(slurm, "--feature-prefix", "fab_", "--degraded-weight", "50", "--json")
    first = next(r for r in json.loads(result.stdout)["nodes"] if r["node"] == "node0001")
    assert first["weight"]["new"] == 51 and first["features"]["new"][0] == "fab_degraded"


def test_help_names_the_labels_and_exit_codes() -> None:
    result = CliRunner().invoke(main, ["health", "--help"])
    assert result.exit_code == 0
    for text in ("--apply", "--constraint=topo_ok", "topo_degraded", "--no-drain", "10 when"):
        assert text in result.output
    assert Exit.APPLY == 10
    words = " ".join(CliRunner().invoke(main, ["--help"]).output.split())
    assert "10 Slurm refused a change" in words and "health --apply" in words


def test_a_snapshot_drains_the_node_whose_nvlink_is_not_ready(slurm: Path, tmp_path: Path) -> None:
    from tests.unit.test_generate_snapshot import make_snapshot

    snap = make_snapshot(tmp_path / "snap", ib=True)
    gpus = [f"gpu{i:04d}" for i in range(1, 17)]
    (slurm / "nodes.json").write_text(json.dumps({"nodes": [slurm_node(n) for n in gpus]}))
    env = {"PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"}
    argv = ["--config", os.devnull, "health", "--snapshot", str(snap), "--slurm-version", "25.05"]
    result = CliRunner().invoke(main, [*argv, "--json"], env=env)
    assert result.exit_code == Exit.DIFFERS, result.output
    rows = {row["node"]: row for row in json.loads(result.stdout)["nodes"]}
    sick = rows["gpu0006"]
    assert sick["verdict"] == "drain" and sick["drain_reason"] == "topograph: fabric-not-completed"
    assert sick["features"]["new"] == ["topo_drain", "topo_leaf_leaf-su001-r0"]  # in no block
    assert rows["gpu0005"]["features"]["new"] == [
        "topo_ok",
        "topo_leaf_leaf-su001-r0",
        "topo_block_nvl-gpu0005",
    ]


def test_a_bench_record_slow_node_is_degraded_by_health(slurm: Path, tmp_path: Path) -> None:
    from tests.conftest import real_fixture
    from tests.support.nccl_fake import CAPTURE, fake_nccl_tests, scale_table

    launcher = tmp_path / "fake-srun"
    table = scale_table({"node0003": 0.4})
    launcher.write_text(fake_nccl_tests(real_fixture(CAPTURE).read_text(), table))
    launcher.chmod(0o755)
    record = tmp_path / "bench"
    allocation = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node[0001-0008]"}
    bench = ["bench", "--sim", SIM, "--launcher", str(launcher), "--out-dir", str(record)]
    ran = CliRunner().invoke(main, ["--config", os.devnull, *bench], env=allocation)
    assert ran.exit_code == Exit.DIFFERS, ran.output

    def node3(*args: str) -> dict[str, object]:
        rows = json.loads(run(slurm, "--json", *args).stdout)["nodes"]
        return next(row for row in rows if row["node"] == "node0003")

    assert node3()["verdict"] == "healthy"
    slow = node3("--bench", str(record))
    assert slow["verdict"] == "degraded", slow
    assert [f["kind"] for f in slow["findings"]] == ["slow-node"]  # type: ignore[attr-defined]
    one_error(run(slurm, "--bench", str(tmp_path / "none")), Exit.INPUT, "no bench record")


def test_health_reads_the_fabric_with_collection_paused(
    slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = watch_analysis(monkeypatch)
    assert run(slurm).exit_code in (0, 1)
    assert gc.isenabled() and seen == [False]


def test_healthy_nodes_that_only_get_their_labels_are_one_line(slurm: Path) -> None:
    """A first run relabels every node; the healthy ones are summarised in one line (a row
    each would be 33k lines at 16k nodes), their commands and JSON rows stay."""
    out = run(slurm).stdout
    table = [line.split()[0] for line in out.splitlines() if line.startswith("node")]
    assert table == ["node0001", "node0006"]
    assert "Healthy, only their topology labels change (6): node[0002-0005,0007-0008]" in out
    rows = json.loads(run(slurm, "--json").stdout)["nodes"]
    assert len(rows) == 9


def test_metrics_writes_the_verdict_counts_as_prometheus_text(slurm: Path, tmp_path: Path) -> None:
    prom = tmp_path / "health.prom"
    result = run(slurm, "--json", "--metrics", str(prom))
    assert result.exit_code == Exit.DIFFERS, result.output  # a dry run with commands pending
    data = json.loads(result.stdout)
    from prometheus_client.parser import text_string_to_metric_families

    samples = {
        (sample.name, sample.labels.get("verdict", "")): sample.value
        for family in text_string_to_metric_families(prom.read_text())
        for sample in family.samples
    }
    for verdict in ("healthy", "unknown", "degraded", "drain"):
        assert samples["topograph_slurm_health_nodes", verdict] == data["summary"][verdict]
    assert samples["topograph_slurm_health_changing_nodes", ""] == data["summary"]["changing"]
    assert samples["topograph_slurm_health_commands", ""] == len(data["commands"])
    assert samples["topograph_slurm_health_slurm_asked", ""] == 1
    assert not updates(slurm)


def test_metrics_must_end_in_prom_and_nothing_is_written(slurm: Path, tmp_path: Path) -> None:
    result = run(slurm, "--metrics", str(tmp_path / "health.txt"))
    one_error(result, Exit.USAGE, "must end in .prom")
    assert not (tmp_path / "health.txt").exists()
