"""The node parts of the job record: ``job-<ID>.d/<node>.start.json`` and ``<node>.end.json``
(a node's link counters at job start and end, the end part naming what changed) and
``job-<ID>.d/task-<step>.<proc>.json`` (one task's binding check). This module owns their
JSON: every part is an object with ``format`` ``topograph-slurm/record``, ``version`` 1,
``part``, ``job_id`` and ``findings`` (model.result.Finding's fields), as the job record's
own part is."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from topograph_slurm.errors import InputError
from topograph_slurm.model.counters import NodeCounters, NvlinkReading, PortReading
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.record import RECORD_FORMAT, RECORD_VERSION, RecordPart
from topograph_slurm.model.result import Finding, decode_finding
from topograph_slurm.sources.record import TASKS_DIR, check_head, open_dir_at, read_at

NODE_START, NODE_END, TASK = "node-start", "node-end", "task"
#: The most a part may hold: a node's ports and NVLinks are a few KiB.
_PART_LIMIT = 4 << 20


def node_part(
    part: str, job_id: str, node: str, reading: NodeCounters, findings: Sequence[Finding]
) -> str:
    """A node part's text: the reading (ports, NVLinks) and *findings*."""
    body = {
        "node": node,
        "ports": [asdict(port) for port in reading.ports],
        "nvlinks": [asdict(link) for link in reading.nvlinks],
    }
    return _encode(part, job_id, findings, body)


def task_part(
    job_id: str, node: str, task: str, status: str, detail: str, findings: Sequence[Finding]
) -> str:
    """A task part's text: the binding status and why."""
    return _encode(
        TASK, job_id, findings, {"node": node, "task": task, "binding": status, "detail": detail}
    )


def read_part(text: str, where: str, part: str | None = None) -> dict[str, Any]:
    """A part's object, checked: format, version and (when given) *part*; InputError naming
    *where* otherwise. A number JSON can write but no counter can hold (``1e400``, ``NaN``)
    is refused as it is read."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as err:
        raise InputError(f"{where}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: not a {RECORD_FORMAT} file")
    check_head(data.get("format"), data.get("version"), data.get("part"), part, where)
    return data


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a part holds")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is out of range")
    return value


def load_part(
    directory: int, name: str, where: Path, owners: frozenset[int] | None, part: str | None = None
) -> dict[str, Any]:
    """The part *name* in the open directory *directory* (:func:`read_at`: no link, one of
    *owners*), as :func:`read_part` checks it; an InputError naming *where* when it is
    missing, untrusted, unreadable, too large or not UTF-8."""
    data = read_at(directory, name, _PART_LIMIT, owners, str(where))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: not UTF-8 ({err.reason})") from None
    return read_part(text, str(where), part)


def read_parts(
    parent: int, directory: Path, owners: frozenset[int] | None
) -> tuple[RecordPart, ...]:
    """Every part in a job's ``job-<ID>.d/`` (*directory*, opened in *parent*; none when it
    does not exist), the node parts (trusted only from *owners*) then the task parts in
    ``tasks/`` (the job's user's: shown, never trusted), in node and task order; an
    unreadable or untrusted one is kept as a record-incomplete finding naming it."""
    try:
        fd = open_dir_at(parent, directory.name, owners, str(directory))
    except InputError as err:
        if not os.path.lexists(directory):
            return ()
        return (_unreadable(directory.name, err),)
    try:
        parts = _parts_in(fd, directory, owners)
        try:
            tasks = open_dir_at(fd, TASKS_DIR, None, str(directory / TASKS_DIR))
        except InputError:
            return parts
        try:
            return parts + _parts_in(
                tasks, directory / TASKS_DIR, frozenset({os.fstat(tasks).st_uid})
            )
        finally:
            os.close(tasks)
    finally:
        os.close(fd)


def _parts_in(fd: int, directory: Path, owners: frozenset[int] | None) -> tuple[RecordPart, ...]:
    names = sorted(
        (name for name in os.listdir(fd) if name.endswith(".json") and not name.startswith(".")),
        key=natural_key,
    )
    return tuple(_part(fd, name, directory / name, owners) for name in names)


def _part(fd: int, name: str, path: Path, owners: frozenset[int] | None) -> RecordPart:
    try:
        data = load_part(fd, name, path, owners)
        return RecordPart(
            path.stem,
            str(data.get("part", "")),
            str(data.get("node", "")),
            str(data.get("binding", "")),
            tuple(findings(data, str(path))),
        )
    except InputError as err:
        return _unreadable(path.stem, err)


def _unreadable(name: str, err: InputError) -> RecordPart:
    trouble = Finding(FindingKind.RECORD_INCOMPLETE, name, f"unreadable part: {err}")
    return RecordPart(name, "", "", "", (trouble,))


def reading(data: Mapping[str, Any], where: str) -> NodeCounters:
    """The counters a node part holds; InputError naming *where* when they are malformed."""
    try:
        ports = tuple(_port(entry) for entry in data["ports"])
        nvlinks = tuple(
            NvlinkReading(_whole(e["gpu"]), _whole(e["link"]), _numbers(e["counters"]))
            for e in data["nvlinks"]
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as err:
        raise InputError(f"{where}: malformed counters ({type(err).__name__}: {err})") from None
    return NodeCounters(ports, nvlinks)


def findings(data: Mapping[str, Any], where: str) -> list[Finding]:
    """A part's findings; InputError naming *where* when malformed."""
    try:
        return [decode_finding(entry) for entry in data["findings"]]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InputError(f"{where}: malformed findings ({type(err).__name__}: {err})") from None


def _port(entry: Mapping[str, Any]) -> PortReading:
    texts = {
        key: str(entry[key])
        for key in ("device", "port", "width", "speed", "state", "phys_state", "link_layer")
    }
    return PortReading(counters=_numbers(entry["counters"]), **texts)


def _whole(value: Any) -> int:
    """A GPU or link index: a JSON integer, never a float, text or bool."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{str(value)[:20]!r} is not a GPU or link index")
    return value


def _numbers(counters: Mapping[str, Any]) -> dict[str, int]:
    """Counter values back as ints: only ints (JSON numbers) are accepted, never text."""
    if not all(type(value) is int and value >= 0 for value in counters.values()):
        raise ValueError("a counter value is not a non-negative integer")
    return {str(name): value for name, value in counters.items()}


def _encode(part: str, job_id: str, found: Sequence[Finding], body: Mapping[str, Any]) -> str:
    data = {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "part": part,
        "job_id": job_id,
        **body,
        "findings": [asdict(finding) for finding in found],
    }
    return json.dumps(data, indent=1, ensure_ascii=True) + "\n"
