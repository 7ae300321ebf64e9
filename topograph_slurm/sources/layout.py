"""The one reader of the topology files we write: topology.conf (tree or block) and topology.yaml.

Three callers read them back. The shrink guard counts the nodes of the file already on disk
before it lets a much smaller one replace it; stable NVLink block names take the block list
of the file written last time (or a hand-written racks list) so that names and positions stay
put across runs; ``explain`` and ``order`` take the whole tree and blocks, from a file or from
``scontrol show topology`` (the same ``Key=Value`` lines, plus ``Level=``, ``BlockIndex=`` and
``AggregatedBlock=`` lines that are derived and skipped). All read the same syntax the same
way: Slurm's case-insensitive keys, ``#`` comments and backslash continuations in
topology.conf; any ``nodes`` value in topology.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from topograph_slurm.errors import InputError
from topograph_slurm.model import names
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import (
    Block,
    BlockTopology,
    LeafGroup,
    MadeWith,
    NamedTopology,
    Tree,
    TreeSwitch,
)

# A conf file is recognised by its line keys; Slurm parses keys case-insensitively.
_CONF_KEY = re.compile(r"^\s*(?:switchname|blockname|blocksizes)\s*=", re.IGNORECASE | re.MULTILINE)
_CONF_BLOCK_KEY = re.compile(r"^\s*blockname\s*=", re.IGNORECASE | re.MULTILINE)
_CONF_BLOCK = re.compile(r"^\s*blockname\s*=\s*(\S+)(.*)$", re.IGNORECASE)
_CONF_NODES = re.compile(r"(?:^|\s)nodes\s*=\s*(\"[^\"]*\"|\S+)", re.IGNORECASE)
_CONF_SWITCH = re.compile(r"^\s*switchname\s*=\s*(\S+)(.*)$", re.IGNORECASE)
_CONF_SWITCHES = re.compile(r"(?:^|\s)switches\s*=\s*(\"[^\"]*\"|\S+)", re.IGNORECASE)
# BlockSizes= in topology.conf; BlockSize= on every line of `scontrol show topology`.
_CONF_SIZES = re.compile(r"(?:^|\s)blocksizes?\s*=\s*(\S+)", re.IGNORECASE)


#: The header line that names what a file was made with (templates/topology.*.j2).
_MADE = re.compile(r"^# Made for Slurm (.+); node list: (.+)\.$", re.MULTILINE)
#: Only a header is searched: the comments above the first line of data.
_HEADER_BYTES = 4096


def made_with(text: str) -> MadeWith | None:
    """The release and node list a file of ours names in its header (None: it names none, as
    files written before the header did)."""
    match = _MADE.search(text[:_HEADER_BYTES])
    return MadeWith(match.group(1), match.group(2)) if match else None


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


def _conf_names(pattern: re.Pattern[str], rest: str, where: str) -> list[str]:
    """The names of one ``Key=hostlist`` of a line (none when the key is absent)."""
    found = pattern.search(rest)
    hostlist = found.group(1).strip('"') if found else ""
    return names.expand(hostlist, where) if hostlist and hostlist != "(null)" else []


def _layout_from_conf(text: str, where: str) -> list[Block]:
    blocks = []
    for line in _conf_lines(text):
        match = _CONF_BLOCK.match(line)
        if match:
            blocks.append(Block(match.group(1), _conf_names(_CONF_NODES, match.group(2), where)))
    return blocks


def _yaml_topology(data: Any, topology: str | None, kind: str) -> dict[Any, Any] | None:
    """The ``kind`` section (``tree`` or ``block``) of the topology.yaml entry named
    *topology*, else of the first entry that has one."""
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get(kind), dict):
            continue
        if topology is None or item.get("topology") == topology:
            section: dict[Any, Any] = item[kind]
            return section
    return None


def _block_entries(data: Any, topology: str | None) -> list[Any] | None:
    """The ``blocks`` list of a topology.yaml (the named or first block topology), or the
    document itself when it is a plain racks list."""
    if not isinstance(data, list):
        return None
    if all(isinstance(item, dict) and isinstance(item.get("block"), str) for item in data):
        return data
    section = _yaml_topology(data, topology, "block")
    if section is None:
        return None
    blocks = section.get("blocks")
    return blocks if isinstance(blocks, list) else []


def _yaml_document(text: str, where: str) -> Any:
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):  # ValueError: a 5000-digit number
        raise InputError(f"{where}: invalid YAML") from None


def _layout_from_yaml(text: str, where: str, topology: str | None) -> list[Block]:
    return _blocks_from_entries(_block_entries(_yaml_document(text, where), topology), where)


def _blocks_from_entries(entries: list[Any] | None, where: str) -> list[Block]:
    blocks = []
    for entry in entries or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("block"), str):
            raise InputError(f"{where}: every block needs a 'block' name")
        blocks.append(Block(entry["block"], _yaml_names(entry.get("nodes"), where)))
    return blocks


def _yaml_names(value: object, where: str) -> list[str]:
    """The names of a ``nodes`` or ``children`` hostlist of topology.yaml (none when unset)."""
    return names.expand(str(value), where) if value else []


# --------------------------------------------------------------------------- whole topology


def parse_topology(
    text: str, where: str = "topology", topology: str | None = None
) -> NamedTopology:
    """The tree and the blocks of a topology.conf, of ``scontrol show topology`` output or of a
    topology.yaml: there the topology named *topology*, else the first tree and the first
    block topology together (a site's usual ``ib`` + ``nvl`` pair: both levels of the fabric).
    A topology that is neither (flat, or empty text) comes back with neither."""
    if _CONF_KEY.search(text):
        tree, blocks = _tree_from_conf(text, where), _blocks_from_conf(text, where)
    else:
        data = _yaml_document(text, where)
        if topology is not None and not _yaml_has(data, topology):
            raise InputError(f"{where}: no topology named {topology!r}")
        tree = _tree_from_yaml(_yaml_topology(data, topology, "tree"), where)
        block_section = _yaml_topology(data, topology, "block")
        blocks = _blocks_from_yaml(block_section, data, topology, where)
    _check_names(tree, blocks, where)
    return NamedTopology(topology or "", tree, blocks)


def topology_names(text: str, where: str = "topology") -> list[str]:
    """The names of the tree and block topologies of a topology.yaml, in file order (none for
    a topology.conf, whose one topology has no name, and for flat ones, which place nothing)."""
    if _CONF_KEY.search(text):
        return []
    data = _yaml_document(text, where)
    return [
        str(item["topology"])
        for item in (data if isinstance(data, list) else [])
        if isinstance(item, dict)
        and "topology" in item
        and (isinstance(item.get("tree"), dict) or isinstance(item.get("block"), dict))
    ]


_YAML_TOPOLOGY = re.compile(r"\A(?:\s*(?:#[^\n]*|---)?\n)*-\s+topology\s*:")


def looks_like_topology(text: str) -> bool:
    """Whether *text* is one of our topology files (a topology.conf by its keys, a
    topology.yaml by its first entry) rather than, say, a fabric dump: judged on the first
    lines, without parsing a large dump as YAML."""
    return _CONF_KEY.search(text) is not None or _YAML_TOPOLOGY.match(text) is not None


def load_topology(path: Path | str, topology: str | None = None) -> NamedTopology:
    """:func:`parse_topology` of a file; unlike a layout, a missing file is an error."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"cannot read topology {path}: {err.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise InputError(f"cannot read topology {path!r}: invalid path") from None
    return parse_topology(text, str(path), topology)


def _check_names(tree: Tree | None, blocks: BlockTopology | None, where: str) -> None:
    """Every switch, block and node name passes the Slurm name rule (explain prints them)."""
    switches = [leaf.name for leaf in tree.leaves] + [up.name for up in tree.uppers] if tree else []
    names.check(switches, "switch", where)
    names.check(
        (node for leaf in tree.leaves for node in leaf.nodes) if tree else (), "node", where
    )
    if blocks is not None:
        names.check((block.name for block in blocks.blocks), "block", where)
        names.check((node for block in blocks.blocks for node in block.nodes), "node", where)


def _yaml_has(data: Any, topology: str) -> bool:
    return isinstance(data, list) and any(
        isinstance(item, dict) and item.get("topology") == topology for item in data
    )


def _tree_from_conf(text: str, where: str) -> Tree | None:
    """``SwitchName=`` lines: a leaf lists ``Nodes=``, a parent ``Switches=`` (in ``scontrol
    show topology`` a parent lists both; its ``Nodes=`` are its leaves' and are skipped)."""
    switches = []
    for line in _conf_lines(text):
        match = _CONF_SWITCH.match(line)
        if match:
            children = _conf_names(_CONF_SWITCHES, match.group(2), where)
            nodes = [] if children else _conf_names(_CONF_NODES, match.group(2), where)
            switches.append((match.group(1), nodes, children))
    return _tree(switches, where) if switches else None


def _tree_from_yaml(section: dict[Any, Any] | None, where: str) -> Tree | None:
    """The ``switches`` of a topology.yaml tree: ``switch`` with ``nodes`` or ``children``."""
    if section is None:
        return None
    entries = section.get("switches")
    switches = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("switch"), str):
            raise InputError(f"{where}: every switch needs a 'switch' name")
        children = _yaml_names(entry.get("children"), where)
        nodes = [] if children else _yaml_names(entry.get("nodes"), where)
        switches.append((entry["switch"], nodes, children))
    return _tree(switches, where) if switches else None


def _blocks_from_conf(text: str, where: str) -> BlockTopology | None:
    blocks = _layout_from_conf(text, where)
    sizes = [value for line in _conf_lines(text) for value in _CONF_SIZES.findall(line)]
    return _block_topology(blocks, ",".join(sizes).split(",")) if blocks else None


def _blocks_from_yaml(
    section: dict[Any, Any] | None, data: Any, topology: str | None, where: str
) -> BlockTopology | None:
    entries = _block_entries(data, topology)
    if entries is None:
        return None
    sizes = section.get("block_sizes") if section else None
    listed = [str(size) for size in sizes] if isinstance(sizes, list) else []
    return _block_topology(_blocks_from_entries(entries, where), listed)


def _block_topology(blocks: list[Block], sizes: list[str]) -> BlockTopology:
    """Blocks with their distinct sizes, base first; without any Slurm takes the smallest
    block as the base."""
    known = sorted(set(filter(None, map(natural, sizes))))
    smallest = min((len(block.nodes) for block in blocks if block.nodes), default=0)
    return BlockTopology(blocks, known or ([smallest] if smallest else []))


def _tree(switches: list[tuple[str, list[str], list[str]]], where: str) -> Tree:
    """Leaves, uppers and tops from ``(name, nodes, children)``; a switch's level is one above
    its highest child, as Slurm computes it."""
    known = {name for name, _, _ in switches}
    children = {name: kids for name, _, kids in switches if kids}
    for name, kids in children.items():
        unknown = next((kid for kid in kids if kid not in known), None)
        if unknown is not None:
            raise InputError(f"{where}: switch {name!r} lists unknown switch {unknown!r}")
    level = {name: 0 for name, _, kids in switches if not kids}
    while len(level) < len(known):
        ready = [
            n for n, kids in children.items() if n not in level and all(k in level for k in kids)
        ]
        if not ready:
            raise InputError(f"{where}: switches {sorted(known - set(level))} contain each other")
        for name in ready:
            level[name] = 1 + max(level[kid] for kid in children[name])
    parent = {kid: name for name, kids in children.items() for kid in kids}
    uppers = [TreeSwitch(name, level[name], [], kids) for name, kids in children.items()]
    uppers.sort(key=lambda switch: (switch.level, names.natural_key(switch.name)))
    return Tree(
        [LeafGroup(name, [], nodes) for name, nodes, kids in switches if not kids],
        uppers,
        [name for name, _, _ in switches if name not in parent],
    )
