"""The README and docs/ stay a newcomer's way in: short, whole, no merge leftovers, no dead
relative links, every topic page present."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [
    "README.md",
    "generate.md",
    "filters.md",
    "explain-order.md",
    "pools.md",
    "keep-true.md",
    "occupancy.md",
    "record.md",
    "health.md",
    "bench.md",
    "draw.md",
    "moe.md",
    "gres.md",
    "ufm.md",
    "collect.md",
    "configuration.md",
    "exit-codes.md",
    "development.md",
]
#: Git's markers: ``<<<<<<< ours``, a line of exactly seven ``=``, ``>>>>>>> theirs`` (a report's
#: longer ``======`` underline is no marker).
CONFLICT = re.compile(r"^(?:<{7}(?: .*)?|={7}|>{7}(?: .*)?)$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _links(path: Path) -> list[str]:
    """The link targets of a page, outside code blocks and code spans."""
    text = CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    return LINK.findall(text)


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move material into docs/"


@pytest.mark.parametrize("page", PAGES)
def test_every_topic_page_exists(page: str) -> None:
    assert (DOCS / page).is_file()


@pytest.mark.parametrize("path", _markdown(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_merge_conflict_markers(path: Path) -> None:
    found = CONFLICT.findall(path.read_text(encoding="utf-8"))
    assert found == [], f"{path.name}: merge-conflict markers {found}"


@pytest.mark.parametrize("path", _markdown(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file(path: Path) -> None:
    dead = []
    for target in _links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor on the same page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            dead.append(target)
    assert dead == [], f"{path.relative_to(ROOT)}: links to missing files {dead}"


def test_links_are_found() -> None:
    """The link pattern sees the README's links (a broken pattern would pass every page)."""
    links = _links(ROOT / "README.md")
    assert "docs/README.md" in links and "LICENSE" in links
