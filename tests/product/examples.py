"""The console examples of README.md and docs/*.md, read as tests (issue 18: the docs are
tests).

An example is a fenced ``console`` block with at least one ``$ topograph-slurm`` line. Its
``$ `` lines (with ``\\``-continued lines) are shell commands, run in order by bash in one
working directory per page (so a file an earlier example of the page writes is there for a
later one); the lines after a command, up to the next ``$ ``, are what the page says it prints,
stdout and stderr together as a terminal shows them.

Markers, an HTML comment on the line before the fence (invisible on the rendered page):

- ``<!-- example: live-cluster -->``: needs a real cluster (sbatch, a live fabric, a job's
  record); not run by the product stage, listed as skipped with that reason.
- ``<!-- example: not-run REASON -->``: an illustration that cannot run as printed (an elided
  command line); listed as skipped with the reason.
- ``<!-- example: setup COMMAND -->``: a shell command run (silently, it must succeed) before
  the block, for the input file the text describes but does not create (a config file, a
  capture: ``$CHECKOUT`` is the repository there, e.g. ``cp "$CHECKOUT"/tests/fixtures/...``).

Normalisation when comparing: trailing spaces and trailing blank lines are ignored, an output
line that is just ``…`` stands for any number of lines the page elides, a ``…`` inside a
line for any text on that line, and a timestamp (``2026-12-01T23:35:31Z``) for any other:
the page shows the day it was run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ELIDED = "…"
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_ANY_TIME = "<time>"
_MARKER = re.compile(r"^<!--\s*example:\s*(?P<kind>[\w-]+)\s*(?P<arg>.*?)\s*-->\s*$")
SKIPS = ("live-cluster", "not-run")


@dataclass(frozen=True)
class Command:
    """One ``$ `` command and the output the page shows for it."""

    line: int
    shell: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """One console block of a page."""

    page: str
    line: int
    commands: tuple[Command, ...]
    skip: str = ""
    setup: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages(repo: Path) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def examples(repo: Path) -> Iterator[Example]:
    """Every console block with a ``$ topograph-slurm`` line, in page order."""
    for page in pages(repo):
        yield from _page_examples(page.relative_to(repo).as_posix(), page.read_text("utf-8"))


def _page_examples(page: str, text: str) -> Iterator[Example]:
    lines = text.splitlines()
    markers: list[tuple[str, str]] = []
    index = 0
    while index < len(lines):
        marker = _MARKER.match(lines[index])
        if marker:
            markers.append((marker["kind"], marker["arg"]))
        elif lines[index].strip() == "```console":
            end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
            commands = _commands(lines[index + 1 : end], index + 2)
            if any(c.shell.startswith("topograph-slurm") for c in commands):
                yield _example(page, index + 1, commands, markers)
            markers, index = [], end
        elif lines[index].strip():
            markers = []
        index += 1


def _example(
    page: str, line: int, commands: tuple[Command, ...], markers: list[tuple[str, str]]
) -> Example:
    skip = next((f"{kind} {arg}".strip() for kind, arg in markers if kind in SKIPS), "")
    setup = tuple(arg for kind, arg in markers if kind == "setup")
    unknown = [kind for kind, _ in markers if kind not in (*SKIPS, "setup")]
    if unknown:
        raise ValueError(f"{page}:{line}: unknown example marker {unknown[0]!r}")
    return Example(page, line, commands, skip, setup)


def _commands(body: list[str], first: int) -> tuple[Command, ...]:
    commands: list[Command] = []
    shell: list[str] = []
    output: list[str] = []
    start = first
    for number, text in enumerate(body, first):
        if shell and shell[-1].endswith("\\"):
            shell.append(text)
        elif text.startswith("$ "):
            if shell:
                commands.append(Command(start, "\n".join(shell), tuple(output)))
            shell, output, start = [text[2:]], [], number
        elif shell:
            output.append(text)
    if shell:
        commands.append(Command(start, "\n".join(shell), tuple(output)))
    return tuple(commands)


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Whether ``actual`` is what the page shows, ``…`` lines standing for any lines."""
    want = _trim([_TIMESTAMP.sub(_ANY_TIME, line.rstrip()) for line in expected])
    got = _trim([_TIMESTAMP.sub(_ANY_TIME, line.rstrip()) for line in actual])
    pattern = "".join(
        r"(?:[^\n]*\n)*?"
        if line.strip() == ELIDED
        else r"[^\n]*?".join(re.escape(part) for part in line.split(ELIDED)) + "\n"
        for line in want
    )
    return re.fullmatch(pattern, "".join(line + "\n" for line in got)) is not None


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1]:
        lines.pop()
    return lines
