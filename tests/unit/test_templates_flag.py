"""``--templates DIR`` (the Output group) is honoured by the commands that used to render with
the built-in templates only (bench, hooks install) and by the converted ones (diff, doctor):
display.environment(ctx) is their one template environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from topograph_slurm.cli.main import main


def _site(tmp_path: Path, name: str) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / name).write_text("site's own {{ 'template' }}\n")
    return site


@pytest.mark.parametrize(
    ("args", "template"),
    [
        (["bench", "--plan", "--sim", "demo"], "bench.plan.txt.j2"),
        (["diff", "sim:nodes=16", "sim:nodes=16,degraded=1"], "diff.txt.j2"),
    ],
)
def test_templates_override_the_built_in_ones(
    tmp_path: Path, args: list[str], template: str
) -> None:
    site = _site(tmp_path, template)
    result = CliRunner().invoke(main, ["--config", os.devnull, *args, "--templates", str(site)])
    assert result.exit_code in (0, 1), result.output
    assert result.stdout == "site's own template\n"


def test_hooks_install_check_renders_with_the_site_templates(tmp_path: Path) -> None:
    site = _site(tmp_path, "hooks.check.txt.j2")
    args = ["hooks", "install", "--check", "--dir", str(tmp_path / "hooks"), "--binary", "/bin/t"]
    args += ["--record-dir", str(tmp_path / "records"), "--templates", str(site)]
    result = CliRunner().invoke(main, ["--config", os.devnull, *args])
    assert result.exit_code == 1, result.output  # nothing installed yet
    assert result.stdout == "site's own template\n"
