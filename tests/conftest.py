"""Shared pytest fixtures.

Real third-party captures live in ``tests/fixtures/real`` (``SOURCES.md`` there gives each one's
origin and licence); they are part of the repository, so a test whose capture is missing fails.
``TOPOGRAPH_SLURM_FIXTURES`` points elsewhere when set (an empty value counts as unset).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from tests.product import artifact
from tests.product.artifact import Artifact

REPO = Path(__file__).resolve().parent.parent
REAL_FIXTURES = Path(
    os.environ.get("TOPOGRAPH_SLURM_FIXTURES") or REPO / "tests" / "fixtures" / "real"
)


def real_fixture(relpath: str) -> Path:
    """Path of a real third-party fixture, failing the calling test when it is missing."""
    path = REAL_FIXTURES / relpath
    if not path.exists():
        pytest.fail(f"real fixture {relpath} missing under {REAL_FIXTURES}", pytrace=False)
    return path


#: Real dumps that contradict themselves and are refused (exit 3): the exporter's ``-p`` excerpt
#: gives one port two cables (lines picked from two captures; tests/unit/test_ibnetdiscover.py).
REFUSED_DUMPS = frozenset({"ibnetdiscover-p-hdr-leaf-spine-excerpt.txt"})


def real_dump_names() -> list[str]:
    """The real ibnetdiscover dumps that read into a Fabric, by name (one placeholder when the
    fixtures are missing, so a parametrised test fails instead of vanishing)."""
    found = (REAL_FIXTURES / "ibnetdiscover").glob("*.txt")
    return sorted(p.name for p in found if p.name not in REFUSED_DUMPS) or ["(absent)"]


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's default state directory (config.state_dir) in its own temporary place:
    tests run as root must not fill /var/lib/topograph-slurm, nor a user's ~/.local/state."""
    from topograph_slurm import config

    base = tmp_path_factory.mktemp("state")
    monkeypatch.setattr(config, "ROOT_STATE_DIR", base / "var-lib" / "topograph-slurm")
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "xdg"))


@pytest.fixture(scope="session")
def installed_tool(tmp_path_factory: pytest.TempPathFactory) -> Artifact:
    """The shipped artifact, built once per session: the sdist and the wheel built from it, and
    that wheel installed into a fresh venv with no checkout on its path
    (tests/product/artifact.py). Run ``installed_tool.exe`` with ``installed_tool.env()`` from a
    directory outside the checkout; ``installed_tool.wheel`` is what the Docker test cluster
    installs (``ClusterSpec(tool=True)``)."""
    return artifact.shipped(REPO, tmp_path_factory.mktemp("artifact"))


@pytest.fixture
def real_fixtures() -> Path:
    """The folder of real third-party fixtures; fails the test when it is missing."""
    if not REAL_FIXTURES.is_dir():
        pytest.fail(f"real fixtures folder {REAL_FIXTURES} missing", pytrace=False)
    return REAL_FIXTURES


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip a test whose real component (*what*: the Slurm test cluster, the headless browser)
    is missing here, but fail it under ``CI=true``: a CI run that skipped them would pass while
    proving nothing."""
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true but {what} is unavailable: {reason}", pytrace=False)
    pytest.skip(f"{what} unavailable: {reason}")
