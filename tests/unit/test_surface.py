"""The command surface is pinned (tests/golden/surface.txt), one concept has one flag, and
every flag is documented."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.support.surface import leaf_commands, surface
from topograph_slurm.cli.main import SECTIONS, main
from topograph_slurm.errors import SUMMARY, Exit

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "surface.txt"
#: Commands whose result is a file or an environment for a hook, not a report: no --json.
NO_JSON = {
    "spank build": "builds a plugin (.so): files, not a report",
    "units": "writes unit files; --print shows one",
    "record start": "a PrologSlurmctld hook: writes the record (record show --json prints it)",
    "record task": "prints `export` lines for Slurm's TaskProlog",
    "record node-start": "a Prolog hook: prints nothing",
    "record node-end": "an Epilog hook: prints nothing",
    "draw": "the result is a picture (svg/html)",
    "hooks install": "writes hook scripts; --check reports",
}


def test_the_surface_is_the_checked_in_one() -> None:
    text = surface()
    if os.environ.get("UPDATE_SURFACE"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "the CLI surface changed: UPDATE_SURFACE=1 to accept"


@pytest.mark.parametrize("name", [name for name, _ in leaf_commands()])
def test_help_has_no_empty_range_and_lists_own_options_first(name: str) -> None:
    result = CliRunner().invoke(main, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "[x<=None]" not in result.output
    assert "None<=" not in result.output
    sections = re.findall(r"^(\w[\w ]*):$", result.output, re.MULTILINE)
    if "Options" in sections:
        assert sections[sections.index("Options") :][0] == "Options"


def test_every_command_with_a_result_has_json() -> None:
    missing = [
        name
        for name, command in leaf_commands()
        if name not in NO_JSON and not any("--json" in p.opts for p in command.params)
    ]
    assert missing == []


def test_every_option_is_documented() -> None:
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    docs += (ROOT / "README.md").read_text()
    undocumented = sorted(
        {
            opt
            for _, command in leaf_commands()
            for param in command.params
            if isinstance(param, click.Option) and not param.hidden
            for opt in param.opts
            if opt.startswith("--") and opt not in ("--help",) and opt not in docs
        }
    )
    assert undocumented == []


def test_every_command_is_in_one_help_section() -> None:
    listed = [name for names in SECTIONS.values() for name in names]
    assert sorted(listed) == sorted(main.commands)
    assert len(listed) == len(set(listed))


def test_help_lists_every_exit_code_and_the_docs_too() -> None:
    assert set(SUMMARY) == set(Exit)
    help_text = CliRunner().invoke(main, ["--help"]).output
    table = (ROOT / "docs" / "exit-codes.md").read_text()
    for code in Exit:
        assert re.search(rf"^  {int(code)}\s+{re.escape(SUMMARY[code])}$", help_text, re.M)
        assert f"| {int(code)} | {code.name} |" in table


def test_a_renamed_flag_still_works_with_one_warning_line() -> None:
    renamed = [(name, cmd) for name, cmd in leaf_commands() if getattr(cmd, "aliases", None)]
    for name, command in renamed:
        opts = {o for p in command.params for o in p.opts}
        for old, new in command.aliases.items():  # type: ignore[attr-defined]
            assert old not in opts, f"{name}: {old} is both renamed and an option"
            assert new == "" or new in opts, f"{name}: {old} renamed to a missing {new}"


def test_renamed_rewrites_old_spellings_before_the_terminator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from topograph_slurm.cli.options import renamed

    aliases = {"--out": "--out-dir", "--job": ""}
    args = ["--out", "a", "--out=b", "--job", "5", "--job=6", "--outer", "--", "--out"]
    assert renamed(args, aliases) == [
        "--out-dir",
        "a",
        "--out-dir=b",
        "5",
        "6",
        "--outer",
        "--",
        "--out",
    ]
    tail = "; the old spelling goes in the next release"
    assert capsys.readouterr().err.splitlines() == [
        *[f"topograph-slurm: warning: --out is now --out-dir{tail}"] * 2,
        *[f"topograph-slurm: warning: --job is now a JOBID argument{tail}"] * 2,
    ]
