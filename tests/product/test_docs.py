"""The product stage, part 2: the docs are tests. Every console example of README.md and
docs/*.md (tests/product/examples.py says which, and the markers) runs with the installed tool,
from a working directory outside the checkout, and must print what the page shows."""

from __future__ import annotations

import difflib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.product.artifact import Artifact
from tests.product.examples import Example, examples, matches

EXAMPLES = list(examples(REPO))


@dataclass
class Page:
    """One page's working directory and which of its examples ran there."""

    workdir: Path
    ran: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def pages() -> dict[str, Page]:
    """Page -> its working directory, shared by the page's examples in this module."""
    return {}


def shell(
    artifact: Artifact, page: Page, command: str, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` in bash, stdout and stderr in one stream as a terminal shows them
    (unbuffered, so their order is the terminal's), the installed tool first on PATH, the
    tool's default config a page-local one (state in the page's directory, never the
    machine's)."""
    config = page.workdir / ".example-config.yaml"
    if not config.exists():
        config.write_text(f"state_dir: {page.workdir / '.state'}\n", encoding="utf-8")
    env = artifact.env(
        {"COLUMNS": "80", "PYTHONUNBUFFERED": "1", "TOPOGRAPH_SLURM_CONFIG": str(config)}
        | (extra or {})
    )
    return subprocess.run(
        ["bash", "-c", command],
        cwd=page.workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )


def run(artifact: Artifact, page: Page, example: Example) -> list[str]:
    """Run one example in the page's directory; its mismatches, as diffs."""
    page.ran.add(example.name)
    for command in example.setup:
        done = shell(artifact, page, command, {"CHECKOUT": str(REPO)})
        assert done.returncode == 0, f"setup {command!r}: {done.stdout}"
    problems = []
    for command in example.commands:
        got = shell(artifact, page, command.shell).stdout.splitlines()
        if not matches(command.expected, got):
            diff = difflib.unified_diff(list(command.expected), got, "page", "printed", lineterm="")
            problems.append(f"{example.page}:{command.line}: $ {command.shell}\n" + "\n".join(diff))
    return problems


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_docs_example_prints_what_the_page_shows(
    example: Example,
    installed_tool: Artifact,
    pages: dict[str, Page],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if example.skip:
        pytest.skip(f"{example.name}: {example.skip}")
    if example.page not in pages:
        pages[example.page] = Page(tmp_path_factory.mktemp("page"))
    page = pages[example.page]
    # Run alone (-k), an example still finds the files the page's earlier examples made.
    for earlier in EXAMPLES:
        if earlier is example:
            break
        if earlier.page == example.page and not earlier.skip and earlier.name not in page.ran:
            run(installed_tool, page, earlier)
    problems = run(installed_tool, page, example)
    assert not problems, "\n\n".join(problems)
