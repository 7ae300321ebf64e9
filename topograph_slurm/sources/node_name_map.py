"""OpenSM node-name maps: ``0x<guid> "<name>"`` per line, the format opensm and ibnetdiscover
read, so a site can hand topograph-slurm the file it already keeps. It rescues HCAs whose
firmware-default description names no host."""

from __future__ import annotations

import re
from pathlib import Path

from topograph_slurm.errors import InputError
from topograph_slurm.model.fabric import normalize_guid


def parse_node_name_map(text: str, source: str = "node-name-map") -> dict[str, str]:
    """Parse an OpenSM node-name map: ``0x<guid> "<name>"`` per line, ``#`` comments."""
    mapping: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith('"') else raw.strip()
        if not line:
            continue
        match = re.match(r'^(\S+)\s+"([^"]*)"', line) or re.match(r"^(\S+)\s+(\S+)$", line)
        if not match:
            raise InputError(f"{source}:{lineno}: expected '0x<guid> \"<name>\"', got {raw!r}")
        try:
            guid = normalize_guid(match.group(1))
        except ValueError as err:
            raise InputError(f"{source}:{lineno}: {err}") from None
        mapping[guid] = match.group(2).strip()
    return mapping


def load_node_name_map(path: Path) -> dict[str, str]:
    """Read a node-name map file; a missing or unreadable file is one clear error."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"cannot read node-name map {path}: {err.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise InputError(f"cannot read node-name map {str(path)!r}: invalid path") from None
    return parse_node_name_map(text, str(path))
