"""Every ``live-cluster`` docs example is run by an integration test (or listed with the
reason it is not): the product stage skips them, so without this they would rot unseen."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.product.examples import examples
from tests.support.live_examples import UNCLAIMED

_CLAIM = re.compile(r"""assert_page_shows\(\s*["']([^"']+)["'],\s*(\d+)""")


def test_every_live_example_is_run_by_an_integration_test_or_says_why_not() -> None:
    claimed = {
        (page, int(ordinal))
        for path in (REPO / "tests" / "integration").glob("test_*.py")
        for page, ordinal in _CLAIM.findall(path.read_text())
    }
    live: dict[str, int] = {}
    unclaimed = []
    for example in examples(REPO):
        if not example.skip.startswith("live-cluster"):
            continue
        live[example.page] = live.get(example.page, 0) + 1
        key = (example.page, live[example.page])
        if key not in claimed and key not in UNCLAIMED:
            unclaimed.append(f"{example.name} (live-cluster #{key[1]} of {key[0]})")
    assert unclaimed == []
    stale = sorted(set(UNCLAIMED) & claimed)
    assert stale == [], "claimed and listed as unclaimed"
