"""Collection paused for a batch: the caller's setting back, the batch's objects promoted
unscanned, its cycles still collectable."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.analysis_watch import watch_analysis
from topograph_slurm.cli.main import main
from topograph_slurm.sources.gc_pause import no_cyclic_gc

SIM = "nodes=8,rails=1,su=4"


class _Node:
    """A tracked object that can sit in a cycle and be watched through a weak reference."""

    other: _Node | None = None


def test_the_batch_lands_in_the_oldest_generation_and_its_cycles_are_still_collected() -> None:
    assert gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
        kept = [[] for _ in range(5000)]
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle: only a full collection frees it
        watch = weakref.ref(a)
    assert gc.isenabled()
    # nothing young left to walk: the first collection after the pause does not scan the batch
    assert gc.get_count()[0] < len(kept)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept) in oldest and id(kept[-1]) in oldest
    del a, b
    gc.collect()
    assert watch() is None, "promoted, not frozen for good: the cycle was collected"


def test_nested_pauses_restore_only_at_the_outermost() -> None:
    with no_cyclic_gc():
        with no_cyclic_gc():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_caller_with_collection_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with no_cyclic_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_diff_reads_its_fabrics_with_collection_paused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """diff (fabric_state) reads and analyses each side as generate does: collection off
    inside, back on afterwards (health, explain/order and draw: tests/unit/test_health_cli.py)."""
    seen = watch_analysis(monkeypatch)
    (tmp_path / "config.yaml").write_text("slurm_nodes: all\nslurm_version: '24.11'\n")
    args = ["--config", str(tmp_path / "config.yaml"), "diff", f"sim:{SIM}", f"sim:{SIM}"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert gc.isenabled() and seen == [False, False]
