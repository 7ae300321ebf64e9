"""The catalogue of finding kinds (model/findings.py): docs/findings.md lists it exactly, every
producer in the package takes its kinds from it, and no kind's text is written anywhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from topograph_slurm.analysis.nvlink import clique
from topograph_slurm.model.findings import FindingKind, kind
from topograph_slurm.model.health import DEGRADED, DRAIN, UNKNOWN
from topograph_slurm.model.result import LEVEL_INFO, LEVEL_PROBLEM, Finding

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "topograph_slurm"
CATALOGUE = PACKAGE / "model" / "findings.py"
DOCS = ROOT / "docs" / "findings.md"
TEXTS = {member.value for member in FindingKind}

#: Where a kind is passed on rather than named: the function and why it may.
PASSED_ON = {
    ("model/result.py", "decode_finding"): "a record's findings (bench.json, a job record's "
    "parts), of any release",
    ("sources/snapshot.py", "_failure_findings"): "kinds from _failure (typed FindingKind)",
}
#: Literals that spell a kind's text without being a kind (file, text).
NOT_KINDS = {
    ("render/draw/faults.py", "missing-rail"),  # fault classes of the pictures
    ("render/draw/faults.py", "rail-disagreement"),
    ("render/draw/faults.py", "rail-misaligned"),
    ("render/draw/faults.py", "islands"),
    ("sources/sim.py", "islands"),  # the --sim option
}
LEVELS = {"LEVEL_PROBLEM": LEVEL_PROBLEM, "LEVEL_INFO": LEVEL_INFO}


def _health(member: FindingKind) -> str:
    return member.severity or f"ignored: {member.ignored}"


def _docs_rows() -> list[tuple[str, ...]]:
    lines = [line for line in DOCS.read_text().splitlines() if line.startswith("|")]
    assert lines[0] == "| kind | level | health | meaning |"
    assert set(lines[1].replace("|", "").split()) == {"---"}
    return [tuple(cell.strip() for cell in line.strip("|").split(" | ")) for line in lines[2:]]


def test_the_docs_table_is_the_catalogue() -> None:
    assert _docs_rows() == [
        (f"`{m.value}`", " or ".join(m.levels), _health(m), m.meaning) for m in FindingKind
    ]


def test_every_kind_is_whole() -> None:
    assert len(FindingKind) == len(TEXTS)
    for member in FindingKind:
        assert member.name == member.value.upper().replace("-", "_")
        assert member.levels and set(member.levels) <= {LEVEL_PROBLEM, LEVEL_INFO}
        assert len(set(member.levels)) == len(member.levels)
        assert member.severity in (DRAIN, DEGRADED, UNKNOWN, None)
        assert bool(member.ignored) == (member.severity is None)
        assert member.meaning and "|" not in member.meaning
        assert kind(member.value) is member


def test_a_kind_is_its_text_everywhere() -> None:
    finding = Finding(FindingKind.DEGRADED_LINK, "n1", "slow")
    assert finding.kind == "degraded-link" and f"{finding.kind}" == "degraded-link"
    assert {"degraded-link": 1}[finding.kind] == 1
    assert kind("no-such-kind") is None


def test_a_finding_carries_its_kinds_level_unless_told() -> None:
    assert Finding(FindingKind.KEPT_MISSING, "n1", "m").level == LEVEL_INFO
    assert Finding(FindingKind.MISSING_RAIL, "n1", "m").level == LEVEL_PROBLEM
    assert Finding(FindingKind.BENCH_DRIFT, "l", "m", LEVEL_INFO).level == LEVEL_INFO
    assert Finding("from-another-release", "n1", "m").level == LEVEL_PROBLEM


def test_the_nvlink_verdict_kinds_are_the_ones_clique_makes() -> None:
    source = (PACKAGE / "analysis" / "nvlink" / "clique.py").read_text()
    named = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "FindingKind"
    }
    assert named == {member.name for member in clique.VERDICT_KINDS}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(PACKAGE)), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != CATALOGUE
    ]


def test_no_kind_text_outside_the_catalogue() -> None:
    spelled = {
        (name, node.value, node.lineno)
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in TEXTS
    }
    assert {(name, text) for name, text, _ in spelled} <= NOT_KINDS, sorted(spelled)


def _calls(tree: ast.Module) -> list[tuple[str, ast.Call, set[str]]]:
    """Every ``Finding(...)`` call with its function's name and the parameters it annotates
    as ``FindingKind``."""
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        typed = {
            arg.arg
            for arg in func.args.args + func.args.kwonlyargs
            if isinstance(arg.annotation, ast.Name) and arg.annotation.id == "FindingKind"
        }
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
                found.append((func.name, node, typed))
    return found


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _problems(module: str, function: str, call: ast.Call, typed: set[str]) -> list[str]:
    where = f"{module}:{call.lineno} ({function})"
    arg, level = _argument(call, 0, "kind"), _argument(call, 3, "level")
    if isinstance(arg, ast.Attribute) and getattr(arg.value, "id", None) == "FindingKind":
        member = getattr(FindingKind, arg.attr, None)
        if member is None:
            return [f"{where}: no kind FindingKind.{arg.attr}"]
        if level is None:
            return []
        told = LEVELS.get(getattr(level, "id", ""))
        if told is not None and told not in member.levels:
            return [f"{where}: {member} is never {told}"]
        if told is None and len(member.levels) < 2:
            return [f"{where}: {member} has one level, yet the level is computed"]
        return []
    if isinstance(arg, ast.Name) and arg.id in typed:
        return []  # a parameter typed FindingKind: mypy checks the callers
    if (module, function) in PASSED_ON:
        return []
    return [f"{where}: the kind is not a FindingKind member ({ast.unparse(arg or call)})"]


def test_every_finding_the_package_makes_has_a_catalogued_kind_and_level() -> None:
    problems, calls = [], 0
    for module, tree in _modules():
        for function, call, typed in _calls(tree):
            calls += 1
            problems += _problems(module, function, call, typed)
    assert calls >= 40  # the scan sees the producers
    assert problems == []


@pytest.mark.parametrize(
    "source",
    [
        'def f(n):\n    return Finding("degraded-link", n, "m")',
        "def f(n, kind: str):\n    return Finding(kind, n, 'm')",
        "def f(n):\n    return Finding(FindingKind.NO_SUCH, n, 'm')",
        "def f(n):\n    return Finding(FindingKind.KEPT_MISSING, n, 'm', LEVEL_PROBLEM)",
        "def f(n, x):\n    return Finding(FindingKind.MISSING_RAIL, n, 'm', x)",
    ],
)
def test_the_scan_catches_a_producer_outside_the_catalogue(source: str) -> None:
    ((function, call, typed),) = _calls(ast.parse(source))
    assert _problems("x.py", function, call, typed)
