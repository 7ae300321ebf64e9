"""The docs' ``live-cluster`` examples, run by the integration test whose cluster is the
scene the page describes (the product stage skips them: they need slurmctld, hooks, a job).

A test takes its example by page and ordinal (the Nth ``live-cluster`` block of the page),
runs each ``$`` line where the page says it ran (the controller) and compares what it printed
with the page under the product stage's own rules (``tests.product.examples.matches``).
``tests/unit/test_live_examples.py`` checks that every such block is claimed by a test here,
or listed in :data:`UNCLAIMED` with the reason.
"""

from __future__ import annotations

import difflib
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO
from tests.product.examples import Example, examples, matches

#: Live examples no integration test runs yet, and why (page, ordinal) -> reason.
UNCLAIMED: dict[tuple[str, int], str] = {
    ("docs/amd.md", 1): "AMD nodes (none here): tests/unit/test_collect_amd.py collects from "
    "nodes whose rocm-smi answers are real captures replayed",
    ("docs/occupancy.md", 1): "the page's cluster of one partly used and several whole free "
    "units; tests/integration/test_occupancy_keep.py applies the same lines on 24.11 and 26.05 "
    "and checks where Slurm then places a job",
    ("docs/bench.md", 1): "nccl-tests on GPUs (none here); tests/integration/test_bench.py runs "
    "the same sweep through real srun with a stand-in binary replaying recorded output, whose "
    "figures are not the page's",
    ("docs/bench.md", 2): "the diff of the two GPU runs above (bench.md #1)",
    ("docs/keep-true.md", 2): "a job caught inside a 20 s Prolog at the moment of the run; "
    "tests/integration/test_reconfigure_prolog.py asserts the same exit 12, line and files",
    ("docs/keep-true.md", 3): "moves an older release's state beside /etc/slurm/topology.conf "
    "of the machine it runs on; tests/unit/test_state_dir.py moves it the same way",
    ("docs/record.md", 1): "a site's paths; the page prints the output of the same install "
    "with a scratch prefix, and tests/integration/test_hooks.py installs the hooks so",
    ("docs/record.md", 2): "records 41 and 42 of a site's two runs; tests/unit/test_record.py "
    "builds and diffs such records",
}


def live_examples(page: str) -> list[Example]:
    """The page's ``live-cluster`` examples, in page order."""
    return [e for e in examples(REPO) if e.page == page and e.skip.startswith("live-cluster")]


def live_example(page: str, ordinal: int) -> Example:
    """The *ordinal*-th (from 1) ``live-cluster`` example of *page*."""
    found = live_examples(page)
    assert 0 < ordinal <= len(found), f"{page} has {len(found)} live-cluster examples"
    return found[ordinal - 1]


def assert_page_shows(page: str, ordinal: int, run: Callable[[str], str]) -> None:
    """Run the example's ``$`` lines with *run* (a shell line -> stdout and stderr as a
    terminal shows them) and assert each prints what the page shows."""
    example = live_example(page, ordinal)
    problems = []
    for command in example.commands:
        got = run(command.shell).splitlines()
        if not matches(command.expected, got):
            diff = difflib.unified_diff(list(command.expected), got, "page", "printed", lineterm="")
            problems.append(f"{example.page}:{command.line}: $ {command.shell}\n" + "\n".join(diff))
    assert not problems, "\n\n".join(problems)


def run_here(cwd: Path, env: dict[str, str], line: str) -> str:
    """A docs line run on this host in *cwd* as a terminal shows it: stdout and stderr as
    one stream."""
    done = subprocess.run(
        ["bash", "-c", f"{{ {line}\n}} 2>&1"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.stdout
