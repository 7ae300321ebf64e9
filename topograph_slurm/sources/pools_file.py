"""A pools file: the deployment ``explain --pools`` checks. ``pools --json`` writes one (and
``pools --out DIR`` keeps it as ``pools.json``); a hand-written one needs only

    {"instances": [{"name": "decode-0", "role": "decode", "tp": 16,
                    "nodes": ["gpu0001", "gpu0002"]},
                   {"name": "prefill-0", "role": "prefill", "tp": 8, "nodes": ["gpu0003"],
                    "pairs": ["decode-0"]}]}

A prefill instance's ``pairs`` name the decode instances it sends KV cache to (a decode's are
read too); ``kv_paths`` of ``pools --json`` are read when present, and an instance's ``gpus``
(its local GPU indices on each node, when instances share a node; default: its share of each
node's GPUs from 0). Every shape error is one InputError naming the file and the entry:
``pairs`` a list of instance names, ``kv_paths`` a list of objects naming a prefill and a
decode instance; JSON nested deeper than Python can read, or a number of more digits than
``int`` converts, is not JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from topograph_slurm.errors import InputError
from topograph_slurm.model.pools import DECODE, PREFILL, ROLES, RunningInstance, RunningPools


def load_pools(path: str) -> RunningPools:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read pools file {path}: {err}") from None
    except RecursionError:
        raise InputError(f"{path}: not JSON (nested too deeply)") from None
    except ValueError as err:  # JSONDecodeError, or an integer of more than 4300 digits
        raise InputError(f"{path}: not JSON ({err})") from None
    return parse_pools(data, path)


def parse_pools(data: Any, source: str) -> RunningPools:
    """The instances and pairs of a pools file's JSON *data*."""
    entries = data.get("instances") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{source}: a pools file has a non-empty list of instances")
    instances = tuple(
        _instance(entry, f"{source}: instance {i + 1}") for i, entry in enumerate(entries)
    )
    roles = {instance.name: instance.role for instance in instances}
    if len(roles) != len(instances):
        raise InputError(f"{source}: two instances have the same name")
    pairs = _pairs(data, entries, roles, source)
    return RunningPools(instances, pairs)


def _instance(entry: Any, where: str) -> RunningInstance:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: not an object")
    name, role, tp, nodes = (entry.get(key) for key in ("name", "role", "tp", "nodes"))
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: no name")
    if role not in ROLES:
        raise InputError(f"{where} ({name}): role is {' or '.join(ROLES)}, got {role!r}")
    if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
        raise InputError(f"{where} ({name}): tp is a positive integer, got {tp!r}")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
        raise InputError(f"{where} ({name}): nodes is a non-empty list of node names")
    gpus = entry.get("gpus")
    indices = isinstance(gpus, list) and all(type(g) is int and g >= 0 for g in gpus)
    if gpus is not None and not (indices and gpus):
        raise InputError(f"{where} ({name}): gpus is a non-empty list of local GPU indices")
    return RunningInstance(name, role, tp, tuple(nodes), tuple(gpus) if gpus else None)


def _pairs(
    data: dict[str, Any], entries: list[dict[str, Any]], roles: dict[str, str], source: str
) -> tuple[tuple[str, str], ...]:
    """(prefill, decode) pairs from ``kv_paths``, else from the instances' ``pairs``."""
    found: list[tuple[str, str]] = []
    paths = data.get("kv_paths", [])
    if not isinstance(paths, list) or not all(_names_a_pair(path) for path in paths):
        raise InputError(
            f"{source}: kv_paths is a list of objects with a prefill and a decode instance name"
        )
    found.extend((path["prefill"], path["decode"]) for path in paths)
    for entry in entries:
        others = entry.get("pairs", [])
        if not isinstance(others, list) or not all(isinstance(o, str) for o in others):
            where = f"{source}: instance {entry['name']}"
            raise InputError(f"{where}: pairs is a list of instance names")
        for other in others:
            pair = (entry["name"], other) if entry["role"] == PREFILL else (other, entry["name"])
            found.append(pair)
    for prefill, decode in found:
        if roles.get(prefill) != PREFILL or roles.get(decode) != DECODE:
            raise InputError(
                f"{source}: pair {prefill!r} - {decode!r} is not a prefill and a decode instance"
            )
    return tuple(dict.fromkeys(found))


def _names_a_pair(path: Any) -> bool:
    return isinstance(path, dict) and all(
        isinstance(path.get(key), str) for key in ("prefill", "decode")
    )
