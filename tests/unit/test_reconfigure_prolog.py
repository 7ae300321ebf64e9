"""``generate --reconfigure`` waits while jobs are in their prolog on Slurm up to 26.05 with
``PrologFlags=DeferBatch`` (a reconfigure then loses the job's batch launch), within a bound.

The answers are trimmed from the real test cluster: ``scontrol show config`` and ``scontrol
show jobs --json`` of a job whose Prolog (``sleep 15``) runs under ``PrologFlags=Alloc,
DeferBatch``, on 24.11.5 and on 26.05.5 alike ``"job_state": ["RUNNING"]`` with
``"state_reason": "Prolog"`` (``squeue``: ``RUNNING Prolog``). tests/integration/
test_reconfigure_prolog.py runs the whole thing on real slurmctld.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scontrol import Answer, ReplayScontrol
from topograph_slurm.errors import DeferredError, Exit, InputError
from topograph_slurm.model.slurm_config import reconfigure_risk
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.slurm.jobs import parse_in_prolog
from topograph_slurm.slurm.reconfigure import (
    PrologGuard,
    apply,
    deferred_path,
    held,
)
from topograph_slurm.slurm.scontrol import Scontrol
from topograph_slurm.slurm.show_config import parse_show_config

CONFIG_2411 = """\
Configuration data as of 2026-12-03T15:49:56
PrologEpilogTimeout     = 65534
PrologFlags             = Alloc,DeferBatch
Prolog[0]               = /etc/slurm/prolog.sh
SlurmUser               = root(0)
SLURM_VERSION           = 24.11.5
TaskProlog              = (null)

Slurmctld(primary) at slurmctld is UP
"""
CONFIG_2411_NO_DEFER = CONFIG_2411.replace("Alloc,DeferBatch", "Alloc")


def _jobs(*jobs: tuple[int, list[str], str]) -> str:
    listed = [
        {"job_id": job_id, "job_state": state, "state_reason": reason, "nodes": "node01"}
        for job_id, state, reason in jobs
    ]
    return json.dumps({"jobs": listed, "errors": [], "warnings": []})


IN_PROLOG = _jobs((1, ["RUNNING"], "Prolog"), (2, ["PENDING"], "Resources"))
CLEAR = _jobs((1, ["RUNNING"], "None"), (2, ["PENDING"], "Resources"))
OLD = "SwitchName=s1 Nodes=node[01-02]\n"
NEW = "SwitchName=s1 Nodes=node[01-04]\n"
RUNNING_NEW = "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[01-04]\n"


class Clock:
    """Time that moves only when the guard sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def _scontrol(replay: ReplayScontrol, tmp_path: Path) -> Scontrol:
    """The replaying scontrol, with a slurmctld log of its own (no show config asked for it)."""
    return Scontrol(str(replay.path), log=str(tmp_path / "slurmctld.log"))


def _guard(bound: float, clock: Clock, lines: list[str]) -> PrologGuard:
    return PrologGuard(bound, lines.append, poll=5.0, sleep=clock.sleep, clock=clock)


def _setup(tmp_path: Path, config: str, jobs: Answer) -> tuple[ReplayScontrol, Path, bytes | None]:
    answers = {
        "show config": Answer(config),
        "show jobs --json": jobs,
        "reconfigure": Answer(),
        "show topology": Answer(RUNNING_NEW),
    }
    scontrol = ReplayScontrol(tmp_path / "bin", answers)
    path = tmp_path / "topology.conf"
    path.write_text(OLD)
    with held(path, 5.0, None) as previous:
        path.write_text(NEW)
    return scontrol, path, previous


def test_a_job_in_its_prolog_is_found_by_reason_or_configuring_flag() -> None:
    assert parse_in_prolog(IN_PROLOG) == ["1"]
    assert parse_in_prolog(CLEAR) == []
    assert parse_in_prolog(_jobs((7, ["RUNNING", "CONFIGURING"], "None"))) == ["7"]
    assert parse_in_prolog(_jobs((8, ["CANCELLED"], "Prolog"))) == []  # nothing left to lose
    with pytest.raises(InputError, match="show jobs --json"):
        parse_in_prolog('{"jobs": [{"job_state": "RUNNING", "state_reason": "Prolog"}]}')


@pytest.mark.parametrize(
    ("config", "risk"),
    [
        (CONFIG_2411, "Slurm 24.11.5 with PrologFlags=DeferBatch"),
        (CONFIG_2411.replace("24.11.5", "26.05.5"), "Slurm 26.05.5 with PrologFlags=DeferBatch"),
        (CONFIG_2411.replace("24.11.5", "26.11.0"), None),  # fixed there
        (CONFIG_2411_NO_DEFER, None),  # the launch is not deferred
        (CONFIG_2411.replace("SLURM_VERSION           = 24.11.5\n", ""), "Slurm (release "),
    ],
)
def test_risk_by_release_and_flag(config: str, risk: str | None) -> None:
    found = reconfigure_risk(parse_show_config(config))
    assert found == risk or (risk is not None and found is not None and found.startswith(risk))


def test_fixed_release_is_26_11() -> None:
    assert SlurmVersion.parse("26.05.5").loses_deferred_launch
    assert not SlurmVersion.parse("26.11").loses_deferred_launch


def test_waits_for_the_prolog_then_reconfigures(tmp_path: Path) -> None:
    # the prolog ends after the second look: the answer turns clear from the third on
    clear, counter = tmp_path / "clear.json", tmp_path / "looks"
    clear.write_text(CLEAR)
    out = tmp_path / "bin" / "scontrol.1.out"  # the "show jobs --json" answer
    swap = f'echo x >> {counter}; [ "$(wc -l < {counter})" -lt 2 ] || cp {clear} {out}'
    scontrol, path, previous = _setup(tmp_path, CONFIG_2411, Answer(IN_PROLOG, then=swap))
    clock, lines = Clock(), []
    guard = _guard(600, clock, lines)
    assert apply(path, previous, NEW, _scontrol(scontrol, tmp_path), guard) is True
    assert scontrol.calls[0] == "show config"
    assert scontrol.calls[1:4] == ["show jobs --json"] * 3
    assert scontrol.calls[4:] == ["reconfigure", "show topology"]
    assert guard.waited == 10.0 and clock.sleeps == [5.0, 5.0]
    assert lines[0].startswith("reconfigure deferred: job 1 in its prolog (Slurm 24.11.5 with")
    assert lines[-1] == "reconfigure: no job in its prolog after 10s"
    assert path.read_text() == NEW


def test_past_the_bound_restores_and_exits_deferred(tmp_path: Path) -> None:
    scontrol, path, previous = _setup(tmp_path, CONFIG_2411, Answer(IN_PROLOG))
    clock, lines = Clock(), []
    guard = _guard(12, clock, lines)
    with pytest.raises(DeferredError) as raised:
        apply(path, previous, NEW, _scontrol(scontrol, tmp_path), guard)
    assert raised.value.exit_code == Exit.DEFERRED == 12
    message = str(raised.value)
    assert message.startswith(
        "reconfigure not run: job 1 still in its prolog (waited 10s of reconfigure_wait 12s)"
    )
    assert f"kept as {deferred_path(path)}" in message
    assert "reconfigure" not in scontrol.calls  # never reconfigured
    assert path.read_text() == OLD and deferred_path(path).read_text() == NEW
    assert clock.now <= 12 and guard.waited == 10.0


def test_without_deferbatch_nothing_waits(tmp_path: Path) -> None:
    scontrol, path, previous = _setup(tmp_path, CONFIG_2411_NO_DEFER, Answer(IN_PROLOG))
    clock, lines = Clock(), []
    guard = _guard(600, clock, lines)
    assert apply(path, previous, NEW, _scontrol(scontrol, tmp_path), guard) is True
    assert scontrol.calls == ["show config", "reconfigure", "show topology"]
    assert guard.waited is None and lines == []


def test_unreadable_jobs_restore_rather_than_risk_a_job(tmp_path: Path) -> None:
    scontrol, path, previous = _setup(tmp_path, CONFIG_2411, Answer("not json"))
    with pytest.raises(DeferredError, match="cannot tell which jobs are in their prolog"):
        apply(path, previous, NEW, _scontrol(scontrol, tmp_path), _guard(60, Clock(), []))
    assert path.read_text() == OLD


def test_zero_wait_gives_up_at_once(tmp_path: Path) -> None:
    scontrol, path, previous = _setup(tmp_path, CONFIG_2411, Answer(IN_PROLOG))
    clock = Clock()
    with pytest.raises(DeferredError, match="waited 0s of reconfigure_wait 0s"):
        apply(path, previous, NEW, _scontrol(scontrol, tmp_path), _guard(0, clock, []))
    assert clock.sleeps == []


def test_the_wait_is_a_metric_also_of_a_failed_run() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.metrics import render_metrics

    env = environment(None)
    text = render_metrics(env, finished=1.0, duration=2.0, outcome=None, last_success=None)
    assert "deferred" not in text  # it did not look: no line
    text = render_metrics(
        env, finished=1.0, duration=2.0, outcome=None, last_success=None, deferred=600.0
    )
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["topograph_slurm_reconfigure_deferred_seconds"] == 600.0
    assert samples["topograph_slurm_success"] == 0
