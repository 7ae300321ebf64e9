"""Whether cyclic GC was on while a command analysed its fabric."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from topograph_slurm.analysis.fabric import analyse as analysis
from topograph_slurm.app import fabric


def watch_analysis(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether collection was on at each analysis from now on (every module that calls it)."""
    seen: list[bool] = []
    real = analysis.analyse

    def watched(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    for module in (fabric, analysis):
        monkeypatch.setattr(module, "analyse", watched, raising=False)
    return seen
