"""The product stage, part 1: the wheel holds the whole package, and every command of the
installed tool answers ``--help`` as the checkout's does, from a fresh venv with no checkout on
its path (issue 18: four packages missing from the wheel crashed ``topograph-slurm --help``
and two Slurm hooks while every test passed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.product import artifact
from tests.product.artifact import Artifact
from tests.product.cli import command_paths, help_problem


def test_the_wheel_holds_every_package_and_template(installed_tool: Artifact) -> None:
    packages = artifact.checkout_packages(REPO)
    assert packages - artifact.wheel_packages(installed_tool.wheel) == set()
    assert artifact.missing_files(REPO, installed_tool.wheel) == []
    # the four a hand-written list once left out
    assert {"topograph_slurm.analysis.experts", "topograph_slurm.analysis.pools"} <= packages


def test_the_installed_tool_is_not_the_checkout(installed_tool: Artifact, tmp_path: Path) -> None:
    code = "import topograph_slurm, sys; print(topograph_slurm.__file__); print(sys.path)"
    done = installed_tool.python_run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.splitlines()[0]).resolve()
    assert installed_tool.venv.resolve() in where.parents
    assert str(REPO) not in done.stdout


def test_every_module_imports_as_installed(installed_tool: Artifact, tmp_path: Path) -> None:
    assert artifact.unimportable(installed_tool, REPO, tmp_path) == []


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "(main)")
def test_every_command_answers_help_as_installed(
    installed_tool: Artifact, path: tuple[str, ...], tmp_path: Path
) -> None:
    assert help_problem(installed_tool, path, tmp_path) == ""


def test_a_package_dropped_from_the_wheel_fails_the_stage(
    installed_tool: Artifact, tmp_path: Path
) -> None:
    """The stage's own checks, on a wheel with one package dropped by hand as a hand-written
    package list drops it: the wheel check names it, the installed modules that need it fail
    to import, and so does the command that reads it (``--help`` alone does not: the command
    imports its analysis when it runs)."""
    dropped = "topograph_slurm.analysis.pools"
    wheel = artifact.without_package(installed_tool.wheel, dropped, tmp_path / "dist")
    assert dropped in artifact.checkout_packages(REPO) - artifact.wheel_packages(wheel)
    assert artifact.missing_files(REPO, wheel)
    broken = artifact.install(wheel, installed_tool.sdist, tmp_path / "venv")
    failures = artifact.unimportable(broken, REPO, tmp_path)
    assert any(line.startswith(f"{dropped}:") for line in failures), failures
    argv = ["pools", "--sim", "nodes=16,gpus=8,rails=2,su=8", "--nodes", "gpu[0001-0016]"]
    pools = broken.run([*argv, "--prefill", "4x8", "--decode", "2x16"], tmp_path)
    assert pools.returncode != 0 and "analysis.pools" in pools.stderr, pools.stderr
