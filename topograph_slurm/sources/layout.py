"""The one reader of the topology files we write: topology.conf (tree or block) and topology.yaml.

Two callers read them back. The shrink guard counts the nodes of the file already on disk
before it lets a much smaller one replace it; stable NVLink block names take the block list
of the file written last time (or a hand-written racks list) so that names and positions stay
put across runs. Both read the same syntax the same way: Slurm's case-insensitive keys, ``#``
comments and backslash continuations in topology.conf; any ``nodes`` value in topology.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from topograph_slurm.errors import InputError
from topograph_slurm.model import names
from topograph_slurm.model.result import Block

# A conf file is recognised by its line keys; Slurm parses keys case-insensitively.
_CONF_KEY = re.compile(r"^\s*(?:switchname|blockname|blocksizes)\s*=", re.IGNORECASE | re.MULTILINE)
_CONF_BLOCK_KEY = re.compile(r"^\s*blockname\s*=", re.IGNORECASE | re.MULTILINE)
_CONF_BLOCK = re.compile(r"^\s*blockname\s*=\s*(\S+)(.*)$", re.IGNORECASE)
_CONF_NODES = re.compile(r"(?:^|\s)nodes\s*=\s*(\"[^\"]*\"|\S+)", re.IGNORECASE)


def _conf_lines(text: str) -> list[str]:
    """topology.conf lines as Slurm reads them: continuations joined, comments cut."""
    joined = re.sub(r"\\\r?\n", " ", text)  # Slurm joins lines ending in a backslash
    return [raw.split("#", 1)[0] for raw in joined.splitlines()]


# --------------------------------------------------------------------------- node count


def count_nodes(text: str) -> int:
    """Number of distinct Slurm node names in a topology.conf (tree/block) or topology.yaml.

    Text that is neither counts 0. Never raises: it also judges the file already on disk, which
    may be anything, and a junk old file must not block writing a good new one.
    """
    is_conf = _CONF_KEY.search(text) is not None
    return names.count(_conf_hostlists(text) if is_conf else _yaml_hostlists(text))


def _conf_hostlists(text: str) -> list[str]:
    """Every ``Nodes=`` value of a topology.conf."""
    return [value.strip('"') for line in _conf_lines(text) for value in _CONF_NODES.findall(line)]


def _yaml_hostlists(text: str) -> list[str]:
    """Every ``nodes`` value anywhere in a topology.yaml (tree switches and blocks alike)."""
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):
        return []
    found: list[str] = []
    stack: list[object] = [data]
    seen: set[int] = set()  # YAML anchors can make a structure refer to itself
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and key.lower() == "nodes":
                    found.extend(_as_strings(value))
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _as_strings(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return [] if value is None else [str(value)]


# --------------------------------------------------------------------------- block layout


def parse_layout(text: str, where: str = "layout", topology: str | None = None) -> list[Block]:
    """Block names, order and nodes from a topology.conf, a topology.yaml (the block topology
    named *topology*, else the first one) or a racks list — whatever the admin points at.

    Layout block names are written again as they are, so each must pass the Slurm name rule
    here, where the file is known: a name holding a newline would inject a line into the next
    topology.conf, one holding a space would break it."""
    if _CONF_BLOCK_KEY.search(text):
        blocks = _layout_from_conf(text, where)
    else:
        blocks = _layout_from_yaml(text, where, topology)
    names.check((block.name for block in blocks), "block", where)
    names.check((node for block in blocks for node in block.nodes), "node", where)
    return blocks


def load_layout(path: Path | str, topology: str | None = None) -> list[Block]:
    """:func:`parse_layout` of a file; a missing file is an empty layout (first run)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as err:
        raise InputError(f"cannot read layout {path}: {err.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise InputError(f"cannot read layout {path!r}: invalid path") from None
    return parse_layout(text, str(path), topology)


def _layout_from_conf(text: str, where: str) -> list[Block]:
    blocks = []
    for line in _conf_lines(text):
        match = _CONF_BLOCK.match(line)
        if not match:
            continue
        nodes = _CONF_NODES.search(match.group(2))
        hostlist = nodes.group(1).strip('"') if nodes else ""
        blocks.append(Block(match.group(1), names.expand(hostlist, where) if hostlist else []))
    return blocks


def _block_entries(data: Any, topology: str | None) -> list[Any] | None:
    """The ``blocks`` list of a topology.yaml (the named or first block topology), or the
    document itself when it is a plain racks list."""
    if not isinstance(data, list):
        return None
    if all(isinstance(item, dict) and isinstance(item.get("block"), str) for item in data):
        return data
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("block"), dict):
            continue
        if topology is None or item.get("topology") == topology:
            blocks = item["block"].get("blocks")
            return blocks if isinstance(blocks, list) else []
    return None


def _layout_from_yaml(text: str, where: str, topology: str | None) -> list[Block]:
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):  # ValueError: a 5000-digit number
        raise InputError(f"{where}: invalid YAML") from None
    entries = _block_entries(data, topology)
    if entries is None:
        return []
    blocks = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("block"), str):
            raise InputError(f"{where}: every block needs a 'block' name")
        hostlist = entry.get("nodes") or ""
        blocks.append(Block(entry["block"], names.expand(str(hostlist), where) if hostlist else []))
    return blocks
