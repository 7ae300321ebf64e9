"""``diff`` of two recorded ``bench`` sweeps: per-level medians, slow nodes and slow links that
appeared or cleared, a side without a record, bad records. The sweeps are real ``bench
--record`` runs whose launcher is the fake nccl-tests replaying a real capture (as in
test_bench_cli.py), recorded into snapshots that also hold the fabric they ran on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import REPO, real_fixture
from tests.support.nccl_fake import CAPTURE, fake_nccl_tests, scale_table
from tests.support.snapshots import write_node_outputs
from topograph_slurm.analysis.bench import drift as bd
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.bench import BenchSummary
from topograph_slurm.model.result import Drift, Finding
from topograph_slurm.sources import sim

SIM = "nodes=9,gpus=2,rails=8,su=3,tiers=2,prefix=bn"
LEAF3 = ["bn0007", "bn0008", "bn0009"]
NO_RECORD = "benchmark medians, slow nodes and slow links: {} holds no bench record"


@dataclass(frozen=True)
class Sweeps:
    clean: Path  # a snapshot with the fabric and a sweep without faults
    faulty: Path  # the same fabric, a sweep with a slow node and a slow leaf uplink
    bare: Path  # the same fabric, no sweep
    alone: Path  # a record-only snapshot (`bench --out-dir NEWDIR`), the clean sweep


def _snapshot(root: Path) -> Path:
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec(SIM))
    entry = {"node": "bn0001", "command": "ibnetdiscover", "exit_code": 0}
    entry["file"] = "fabric/ibnetdiscover.txt"
    return write_node_outputs(root, {}, {"fabric/ibnetdiscover.txt": text}, fabric=entry)


def _launcher(path: Path, capture: str, slow: dict[str, float], uplinks: list) -> Path:
    path.write_text(fake_nccl_tests(capture, scale_table(slow, uplinks)))
    path.chmod(0o755)
    return path


def _bench(launcher: Path, record: Path, *source: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env = {**base, "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "bn[0001-0009]"}
    args = ["bench", *source, "--launcher", str(launcher), "--levels", "leaf,spine-1"]
    done = subprocess.run(
        [sys.executable, "-m", "topograph_slurm", *args, "--out-dir", str(record)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> Sweeps:
    root = tmp_path_factory.mktemp("sweeps")
    capture = real_fixture(CAPTURE).read_text(encoding="utf-8")
    clean = _launcher(root / "clean-srun", capture, {}, [])
    faulty = _launcher(root / "faulty-srun", capture, {"bn0002": 0.4}, [(0.5, LEAF3)])
    found = Sweeps(*(_snapshot(root / name) for name in ("clean", "faulty", "bare")), root / "r")
    for launcher, snap in ((clean, found.clean), (faulty, found.faulty)):
        _bench(launcher, snap, "--snapshot", str(snap), "--gpus-per-node", "2")
    _bench(clean, found.alone, "--sim", SIM)
    return found


def _diff(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--config", os.devnull, "diff", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_two_recorded_sweeps_say_what_got_slower(sweeps: Sweeps) -> None:
    code, out, _ = _diff(sweeps.clean, sweeps.faulty)
    assert code == Exit.DIFFERS
    lines = out.splitlines()
    assert lines[3:9] == [
        "",
        "Benchmark median busbw per level (GB/s):",
        "level               old        new   change",
        "leaf             338.82     338.82      +0%",
        "spine-1          338.82     169.41     -50%  changed",
        "",
    ]
    assert lines[9] == "Changes (3):"
    assert lines[10] == (
        "  [bench-slower] spine-1: median busbw 338.82 -> 169.41 GB/s (-50%, threshold 10%)"
    )
    assert lines[11].startswith("  [slow-node-appeared] bn0002: slow with every partner: ")
    assert lines[12].startswith(
        "  [slow-link-appeared] leaf-su003-r0: nodes bn[0007-0009]: uplinks of leaf"
    )
    # the same fabric on both sides: compared, and nothing changed there
    assert lines[13:] == [
        f"  not compared: NVLink domains: {sweeps.clean} and {sweeps.faulty} cannot show them"
    ]


def test_the_other_way_round_they_cleared_and_got_faster(sweeps: Sweeps) -> None:
    code, out, _ = _diff(sweeps.faulty, sweeps.clean, "--json")
    data = json.loads(out)
    assert code == Exit.DIFFERS
    found = [(c["kind"], c["subject"]) for c in data["changes"]]
    assert found == [
        ("bench-faster", "spine-1"),
        ("slow-node-cleared", "bn0002"),
        ("slow-link-cleared", "leaf-su003-r0"),
    ]
    assert data["changes"][1]["message"].startswith("was: slow with every partner: ")
    assert data["bench_levels"] == [
        {"level": "leaf", "before": 338.82, "after": 338.82, "change": 0.0, "changed": False},
        {"level": "spine-1", "before": 169.41, "after": 338.82, "change": 1.0, "changed": True},
    ]


def test_the_same_sweep_is_no_change(sweeps: Sweeps) -> None:
    code, out, _ = _diff(sweeps.faulty, sweeps.faulty)
    assert code == Exit.OK
    assert "spine-1          169.41     169.41      +0%\n" in out
    assert "Changes (0):\n  none\n" in out


def test_a_move_within_the_threshold_is_no_change(sweeps: Sweeps) -> None:
    code, out, _ = _diff(sweeps.clean, sweeps.faulty, "--drift", "0.5", "--json")
    data = json.loads(out)
    assert [c["kind"] for c in data["changes"]] == ["slow-node-appeared", "slow-link-appeared"]
    assert [lvl["changed"] for lvl in data["bench_levels"]] == [False, False]
    assert code == Exit.DIFFERS  # the slow node and link still appeared


def test_a_record_alone_is_compared_as_a_record_without_fabric(sweeps: Sweeps) -> None:
    for alone in (sweeps.alone, sweeps.alone / "bench.json"):
        code, out, _ = _diff(alone, sweeps.faulty, "--json")
        data = json.loads(out)
        assert code == Exit.DIFFERS
        kinds = [c["kind"] for c in data["changes"]]
        assert kinds == ["bench-slower", "slow-node-appeared", "slow-link-appeared"]
        assert f"switches: {alone} cannot show them" in data["not_compared"]


def test_one_side_without_a_record_is_not_compared(sweeps: Sweeps) -> None:
    code, out, _ = _diff(sweeps.faulty, sweeps.bare)
    assert code == Exit.OK and "Benchmark" not in out
    assert f"  not compared: {NO_RECORD.format(sweeps.bare)}\n" in out
    code, out, _ = _diff(f"sim:{SIM}", sweeps.alone / "bench.json", "--json")
    assert code == Exit.OK and NO_RECORD.format(f"sim:{SIM}") in json.loads(out)["not_compared"]


def test_no_record_on_either_side_says_nothing_of_benchmarks(sweeps: Sweeps) -> None:
    code, out, _ = _diff(sweeps.bare, f"sim:{SIM}")
    assert code == Exit.OK and "bench" not in out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: {**d, "levels": 5}, "malformed bench record"),
        (lambda d: {**d, "version": 99}, "unsupported bench record version 99"),
        (lambda d: {**d, "findings": [{"kind": "slow-node"}]}, "malformed bench record"),
    ],
)
@pytest.mark.parametrize("as_dir", [True, False])
def test_a_bad_record_is_one_line_and_exit_3(
    sweeps: Sweeps, tmp_path: Path, edit: object, message: str, as_dir: bool
) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(sweeps.faulty, bad)
    data = json.loads((bad / "bench.json").read_text())
    (bad / "bench.json").write_text(json.dumps(edit(data)))  # type: ignore[operator]
    side = bad if as_dir else bad / "bench.json"
    code, out, err = _diff(sweeps.clean, side)
    assert code == Exit.INPUT and out == ""
    assert err.count("\n") == 1 and err.startswith("topograph-slurm: error: ") and message in err


def test_a_drift_threshold_of_zero_is_a_usage_error(sweeps: Sweeps) -> None:
    code, out, err = _diff(sweeps.clean, sweeps.faulty, "--drift", "0")
    assert code == Exit.USAGE and out == "" and "--drift" in err


# --------------------------------------------------------------------------- the comparison


def _record(medians: dict[str, float], *findings: Finding) -> BenchSummary:
    return BenchSummary("r", "2026-12-01T00:00:00Z", medians, list(findings))


def test_the_threshold_itself_is_no_change_and_records_own_drift_is_not_compared() -> None:
    own = Finding("bench-drift", "leaf", "level leaf median busbw 90 GB/s, was 100 (-10%)")
    old = _record({"leaf": 100.0, "spine-1": 50.0, "node": 300.0})
    new = _record({"leaf": 90.0, "spine-1": 44.0, "island": 20.0}, own)
    result = bd.with_bench(Drift("a", "b"), old, new, 0.1)
    assert [(c.kind, c.subject) for c in result.changes] == [("bench-slower", "spine-1")]
    assert [(d.level, d.changed) for d in result.bench_levels] == [
        ("leaf", False),
        ("spine-1", True),
        ("node", False),
        ("island", False),
    ]
    assert result.not_compared == [
        "benchmark level node: only a has a median",
        "benchmark level island: only b has a median",
    ]


def test_without_records_the_fabric_drift_is_returned_as_it_is() -> None:
    fabric = Drift("a", "b", not_compared=["switches: a cannot show them"])
    assert bd.with_bench(fabric, None, None) is fabric
    only_old = bd.with_bench(fabric, _record({"leaf": 1.0}), None)
    assert only_old.not_compared[-1] == NO_RECORD.format("b") and not only_old.changes


_SUBJECTS = st.sampled_from(["bn0001", "bn0002", "leaf-su001-r0", "bn0001<->bn0003"])
_FINDINGS = st.lists(
    st.builds(Finding, st.sampled_from(["slow-node", "slow-link"]), _SUBJECTS, st.just("m")),
    unique_by=lambda f: (f.kind, f.subject),
)
_MEDIANS = st.dictionaries(
    st.sampled_from(["node", "leaf", "spine-1"]), st.floats(1.0, 1000.0), min_size=1
)


@given(_MEDIANS, _FINDINGS, _MEDIANS, _FINDINGS)
def test_swapping_the_sides_mirrors_every_change(
    m1: dict[str, float], f1: list[Finding], m2: dict[str, float], f2: list[Finding]
) -> None:
    mirror = {
        "bench-slower": "bench-faster",
        "slow-node-appeared": "slow-node-cleared",
        "slow-link-appeared": "slow-link-cleared",
    }
    mirror |= {v: k for k, v in mirror.items()}
    old, new = _record(m1, *f1), _record(m2, *f2)
    forward = bd.with_bench(Drift("a", "b"), old, new, 0.1).changes
    backward = bd.with_bench(Drift("b", "a"), new, old, 0.1).changes
    findings = {(mirror[c.kind], c.subject) for c in forward if c.kind.startswith("slow-")}
    assert findings == {(c.kind, c.subject) for c in backward if c.kind.startswith("slow-")}
    assert not bd.with_bench(Drift("a", "a"), old, old, 0.1).changes
