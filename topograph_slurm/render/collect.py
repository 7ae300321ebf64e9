"""``collect --json``: what a collection did, per node and command, as versioned data (the
text summary on stderr says the same in lines; docs/collect.md has the schema)."""

from __future__ import annotations

import json
from typing import Any

#: ``collect --json``'s format and version.
COLLECT_FORMAT = "topograph-slurm-collect"
COLLECT_VERSION = 1


def _result(result: Any) -> dict[str, Any]:
    entry: dict[str, Any] = result.manifest_entry()
    return entry | {"ok": result.ok}


def render_collect_json(outcome: Any) -> str:
    """*outcome* (a ``CollectOutcome``: the snapshot written, each command's result, the
    ibnetdiscover run) as JSON: the nodes that answered, those that failed, every result as
    manifest.json records it plus whether it succeeded."""
    data = {
        "format": COLLECT_FORMAT,
        "version": COLLECT_VERSION,
        "snapshot": str(outcome.path),
        "duration": round(outcome.duration, 3),
        "ok_nodes": outcome.ok_nodes,
        "failed_nodes": outcome.failed_nodes,
        "results": [_result(result) for result in outcome.results],
        "ibnetdiscover": None if outcome.fabric is None else _result(outcome.fabric),
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
