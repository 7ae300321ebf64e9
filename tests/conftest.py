"""Shared pytest fixtures.

Third-party dumps live beside the checkout in ``../shared/fixtures/real`` and are never copied
into the repository; tests that need them skip with a reason in a user's clone without it.
``TOPOGRAPH_SLURM_FIXTURES`` points elsewhere when the layout differs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parent.parent
REAL_FIXTURES = Path(
    os.environ.get("TOPOGRAPH_SLURM_FIXTURES", REPO.parent / "shared" / "fixtures" / "real")
)


def real_fixture(relpath: str) -> Path:
    """Path of a real third-party fixture, skipping the calling test when it is absent."""
    path = REAL_FIXTURES / relpath
    if not path.exists():
        pytest.skip(f"real fixture {relpath} not found under {REAL_FIXTURES} (../shared absent)")
    return path


#: Real dumps that contradict themselves and are refused (exit 3): the exporter's ``-p`` excerpt
#: gives one port two cables (lines picked from two captures; tests/unit/test_ibnetdiscover.py).
REFUSED_DUMPS = frozenset({"ibnetdiscover-p-hdr-leaf-spine-excerpt.txt"})


def real_dump_names() -> list[str]:
    """The real ibnetdiscover dumps that read into a Fabric, by name (one placeholder when the
    fixtures are absent, so a parametrised test skips instead of vanishing)."""
    found = (REAL_FIXTURES / "ibnetdiscover").glob("*.txt")
    return sorted(p.name for p in found if p.name not in REFUSED_DUMPS) or ["(absent)"]


@pytest.fixture
def real_fixtures() -> Path:
    """The folder of real third-party fixtures; skips the test when it is absent."""
    if not REAL_FIXTURES.is_dir():
        pytest.skip(f"real fixtures folder {REAL_FIXTURES} not found (../shared absent)")
    return REAL_FIXTURES


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip a test whose real component (*what*: the Slurm test cluster, the headless browser)
    is missing here, but fail it under ``CI=true``: a CI run that skipped them would pass while
    proving nothing."""
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true but {what} is unavailable: {reason}", pytrace=False)
    pytest.skip(f"{what} unavailable: {reason}")
