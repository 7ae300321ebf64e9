"""The job record as text: the TaskProlog's ``export`` lines, ``record show`` and ``record
diff``. The exported names and values are chosen here; their shell syntax is the template's."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import jinja2

from topograph_slurm.model import names
from topograph_slurm.model.record import JobRecord, RecordDiff, RecordPart
from topograph_slurm.render.environment import render

#: What an exported value may hold: one line of printable ASCII; anything else becomes ``?``.
_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e]")
#: What an exported name must be: ours, and a shell variable name.
_EXPORT_NAME = re.compile(r"TOPOGRAPH_[A-Z0-9_]+")
#: The export a TaskProlog prints when the job has no readable record.
MISSING = [("TOPOGRAPH_RECORD_MISSING", "1")]


def exports(path: Path, record: JobRecord) -> list[tuple[str, str]]:
    """The variables a task gets (docs/record.md lists them), as (name, value)."""
    home = record.home_crossings()
    layout = record.layout
    layout_text = (
        f"tp={layout.tp},pp={layout.pp},gpn={layout.gpus_per_node},src={layout.source}"
        if layout
        else "none"
    )
    return [
        ("TOPOGRAPH_RECORD", str(path)),
        ("TOPOGRAPH_FINGERPRINT", record.fingerprint),
        ("TOPOGRAPH_TOPOLOGY_SHA256", record.topology_sha256),
        ("TOPOGRAPH_TP_CROSSINGS", str(home.get("tp", 0))),
        ("TOPOGRAPH_CROSSINGS", ",".join(f"{kind}={n}" for kind, n in home.items())),
        ("TOPOGRAPH_TP_HOME", record.tp_home),
        ("TOPOGRAPH_DEGRADED", str(len(record.problems))),
        ("TOPOGRAPH_LAYOUT", layout_text),
        ("TOPOGRAPH_LEAVES", str(len(record.units("leaf")))),
        ("TOPOGRAPH_BLOCKS", str(len(record.units("block")))),
        ("TOPOGRAPH_NODES", str(len(record.nodes))),
    ]


#: A node's own units as exported: (name, the row's index in a unit row after the hostlist).
_NODE_UNITS = (("TOPOGRAPH_BLOCK", 1), ("TOPOGRAPH_LEAF", 2), ("TOPOGRAPH_DOMAIN", 3))


def unit_rows(record: JobRecord) -> list[tuple[str, str, str, str]]:
    """Each distinct (block, leaf, NVLink domain) of the record's nodes with its nodes folded
    into one hostlist: what the exports file carries so each task can find its own node's."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for node in record.nodes:
        grouped.setdefault((node.block, node.leaf, node.domain), []).append(node.node)
    return [(names.fold(nodes), *units) for units, nodes in grouped.items() if any(units)]


def node_units(rows: Sequence[tuple[str, str, str, str]], node: str) -> list[tuple[str, str]]:
    """*node*'s own TOPOGRAPH_BLOCK, TOPOGRAPH_LEAF and TOPOGRAPH_DOMAIN from the exports'
    unit rows; a unit the record does not know (no row names the node, no tree, blocks that
    are not NVLink domains) is left out rather than exported empty."""
    for row in rows:
        if node in names.parse(row[0], "job exports"):
            return [(name, row[index]) for name, index in _NODE_UNITS if row[index]]
    return []


def one_line(value: str) -> str:
    """*value* as one line of printable ASCII (what the TaskProlog protocol can carry)."""
    return _NOT_PRINTABLE.sub("?", value)


def render_exports(env: jinja2.Environment | None, variables: list[tuple[str, str]]) -> str:
    """``export NAME=value`` lines, each value as Slurm reads it: literally, one line; a name
    that is not one of ours (``TOPOGRAPH_*``) is left out. *env* None (the TaskProlog's
    config is broken, so its templates are unknown): the built-in templates."""
    from topograph_slurm.render.environment import environment

    cleaned = [(name, one_line(value)) for name, value in variables if _EXPORT_NAME.fullmatch(name)]
    return render(env or environment(None), "record.exports.j2", variables=cleaned)


def render_show(
    env: jinja2.Environment,
    record: JobRecord,
    parts: Sequence[RecordPart],
    path: str,
    fmt: str,
) -> str:
    """``record show``: the record and its parts as text, or the record's JSON as stored."""
    if fmt == "json":
        from topograph_slurm.sources.record import encode

        return encode(record).decode("utf-8")
    return render(
        env,
        "record.show.txt.j2",
        record=record,
        path=path,
        home=record.home_crossings(),
        leaves=record.units("leaf"),
        blocks=record.units("block"),
        nodes_parts=[part for part in parts if part.part != "task"],
        tasks=[part for part in parts if part.part == "task"],
    )


def render_diff(env: jinja2.Environment, diff: RecordDiff, fmt: str = "text") -> str:
    """``record diff``: each change, the ones that matter for speed marked; or as JSON
    (docs/record.md: ``topograph-slurm-record-diff`` version 1)."""
    if fmt == "json":
        data = {
            "format": "topograph-slurm-record-diff",
            "version": 1,
            "a": diff.a,
            "b": diff.b,
            "matters": diff.matters,
            "changes": [
                {"what": c.what, "a": c.a, "b": c.b, "matters": c.matters} for c in diff.changes
            ],
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    return render(env, "record.diff.txt.j2", diff=diff)
