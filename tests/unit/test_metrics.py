"""``generate --metrics FILE``: Prometheus text for node_exporter's textfile collector, checked
with prometheus_client's own parser; a failed run says so and keeps the last success time."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.render.environment import environment
from topograph_slurm.render.metrics import RunOutcome, outcome_of, render_metrics
from topograph_slurm.sources.metrics import parse_last_success

PINNED = ("--slurm-nodes", "all", "--slurm-version", "24.11")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by name and labels; the parser raises on anything not in the format."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_success_metrics_parse_and_escape_label_values() -> None:
    outcome = RunOutcome(
        placed=30,
        excluded=4,
        findings={("degraded-link", "problem"): 2, ('odd"kind\\\n', "info"): 1},
        written=True,
        reconfigured=True,
        kept_missing=3,
        changes=5,
    )
    text = render_metrics(
        environment(), finished=1800000000.5, duration=1.25, outcome=outcome, last_success=1.0
    )
    got = samples(text)
    assert got[("topograph_slurm_success", ())] == 1
    assert got[("topograph_slurm_last_success_timestamp_seconds", ())] == 1800000000.5
    assert got[("topograph_slurm_nodes", (("state", "placed"),))] == 30
    assert got[("topograph_slurm_nodes", (("state", "kept_missing"),))] == 3
    assert got[("topograph_slurm_excluded_adapters", ())] == 4
    assert got[("topograph_slurm_findings", (("kind", "degraded-link"), ("level", "problem")))] == 2
    assert got[("topograph_slurm_findings", (("kind", 'odd"kind\\\n'), ("level", "info")))] == 1
    assert got[("topograph_slurm_changes", ())] == 5
    assert got[("topograph_slurm_reconfigured", ())] == 1
    assert text.endswith("\n")


def test_outcome_without_analysis_takes_the_inputs_of_the_kept_summary() -> None:
    outcome = outcome_of(None, 10, True, False, kept_missing=2, changes=3)
    assert (outcome.excluded, outcome.kept_missing, outcome.changes, outcome.findings) == (
        0,
        2,
        3,
        {},
    )


def test_cli_counts_findings_by_kind(tmp_path: Path) -> None:
    prom = tmp_path / "m.prom"
    sim = "nodes=24,rails=4,su=8,disagree=3,degraded=2"
    code, _ = run("--sim", sim, "--metrics", str(prom), *PINNED)
    assert code == Exit.OK
    found = {
        labels: value
        for (name, labels), value in samples(prom.read_text()).items()
        if name == "topograph_slurm_findings"
    }
    assert found == {
        (("kind", "degraded-link"), ("level", "problem")): 2,
        (("kind", "rail-disagreement"), ("level", "problem")): 1,
    }


def test_changes_only_when_measured() -> None:
    text = render_metrics(
        environment(), finished=2.0, duration=0.1, outcome=RunOutcome(1, 0), last_success=None
    )
    assert "topograph_slurm_changes" not in text
    assert samples(text)[("topograph_slurm_nodes", (("state", "kept_missing"),))] == 0


def test_failed_run_keeps_the_last_success() -> None:
    text = render_metrics(environment(), finished=9.0, duration=0.5, outcome=None, last_success=7.0)
    got = samples(text)
    assert got[("topograph_slurm_success", ())] == 0
    assert got[("topograph_slurm_last_success_timestamp_seconds", ())] == 7.0
    assert not any(name == "topograph_slurm_nodes" for name, _ in got)
    never = render_metrics(
        environment(), finished=9.0, duration=0.5, outcome=None, last_success=None
    )
    assert "last_success" not in never


@pytest.mark.parametrize(
    "text", ["", "topograph_slurm_last_success_timestamp_seconds NaN\n", "x 1\n"]
)
def test_no_usable_last_success(text: str) -> None:
    assert parse_last_success(text) is None


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--config", "/dev/null", "generate", *args])
    return result.exit_code, result.stderr


def test_cli_success_then_failure(tmp_path: Path) -> None:
    prom = tmp_path / "topograph.prom"
    out = tmp_path / "topology.conf"
    code, _ = run("--sim", "demo", "-o", str(out), "--metrics", str(prom), *PINNED)
    assert code == Exit.OK
    first = samples(prom.read_text())
    assert first[("topograph_slurm_nodes", (("state", "placed"),))] == 32
    assert first[("topograph_slurm_topology_written", ())] == 1
    success = first[("topograph_slurm_last_success_timestamp_seconds", ())]
    code, err = run("--ibnetdiscover", str(tmp_path / "missing.txt"), "--metrics", str(prom))
    assert code == Exit.INPUT and err.count("\n") == 1
    failed = samples(prom.read_text())
    assert failed[("topograph_slurm_success", ())] == 0
    assert failed[("topograph_slurm_last_success_timestamp_seconds", ())] == success
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topograph.prom", "topology.conf"]


def test_kept_missing_nodes_and_changes_come_from_the_kept_summary(tmp_path: Path) -> None:
    prom, out = tmp_path / "topograph.prom", tmp_path / "topology.conf"
    code, _ = run("--sim", "nodes=16,su=8", "-o", str(out), "--metrics", str(prom), *PINNED)
    assert code == Exit.OK
    first = samples(prom.read_text())
    assert ("topograph_slurm_changes", ()) not in first  # nothing to compare with yet
    listed = ("--slurm-nodes", "gpu[0001-0016]", "--slurm-version", "24.11")
    code, _ = run("--sim", "nodes=14,su=8", "-o", str(out), "--metrics", str(prom), *listed)
    assert code == Exit.OK
    second = samples(prom.read_text())
    assert second[("topograph_slurm_nodes", (("state", "kept_missing"),))] == 2
    assert second[("topograph_slurm_changes", ())] == 2  # gpu0015 and gpu0016 vanished


def test_metrics_must_be_a_prom_file_and_not_with_check(tmp_path: Path) -> None:
    code, err = run("--sim", "demo", "--metrics", str(tmp_path / "m.txt"))
    assert code == Exit.USAGE and "must end in .prom" in err
    code, err = run(
        "--sim", "demo", "-o", str(tmp_path / "t"), "--check", "--metrics", str(tmp_path / "m.prom")
    )
    assert code == Exit.USAGE and not (tmp_path / "m.prom").exists()


def _succeeded_once(tmp_path: Path, prom: Path) -> float:
    out = tmp_path / "topology.conf"
    code, _ = run("--sim", "demo", "-o", str(out), "--metrics", str(prom), *PINNED)
    assert code == Exit.OK
    return samples(prom.read_text())[("topograph_slurm_last_success_timestamp_seconds", ())]


def _failed(prom: Path, success: float) -> None:
    failed = samples(prom.read_text())
    assert failed[("topograph_slurm_success", ())] == 0
    assert failed[("topograph_slurm_last_success_timestamp_seconds", ())] == success


@pytest.mark.parametrize(
    ("config", "flags", "code"),
    [
        # a refused config: the metrics file comes from the flag, or from the config's own key
        ("unknown_key: 1\n", ["--metrics", "{prom}"], Exit.CONFIG),
        ("unknown_key: 1\nmetrics: {prom}\n", [], Exit.CONFIG),
        ("keep_missing: 999999999w\nmetrics: {prom}\n", [], Exit.CONFIG),
        # templates that cannot be read
        ("metrics: {prom}\n", ["--templates", "{missing}"], Exit.CONFIG),
    ],
)
def test_a_run_failing_before_its_work_still_says_so(
    tmp_path: Path, config: str, flags: list[str], code: int
) -> None:
    """A config error or missing templates once left the last run's `success 1` in place."""
    prom = tmp_path / "topograph.prom"
    success = _succeeded_once(tmp_path, prom)
    values = {"prom": str(prom), "missing": str(tmp_path / "no-templates")}
    path = tmp_path / "config.yaml"
    path.write_text(config.format(**values))
    args = ["--sim", "demo", *(flag.format(**values) for flag in flags)]
    result = CliRunner().invoke(main, ["--config", str(path), "generate", *args])
    assert result.exit_code == code, result.output
    assert result.stderr.count("\n") == 1
    _failed(prom, success)


def test_an_internal_error_still_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (exit 70) is a failed run for alerting too."""
    from topograph_slurm.app import generate as use_case

    prom = tmp_path / "topograph.prom"
    success = _succeeded_once(tmp_path, prom)

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(use_case, "_generate", broken)
    code, err = run("--sim", "demo", "--metrics", str(prom), *PINNED)
    assert code == Exit.BUG and "internal error (RuntimeError: a bug)" in err
    _failed(prom, success)
