"""A node's link counters as the node itself shows them: the InfiniBand sysfs tree
(``/sys/class/infiniband/<device>/ports/<port>/``: ``counters/*``, ``rate``, ``state``,
``phys_state``, ``link_layer``) and ``nvidia-smi nvlink -e``'s text (run by
``collect/nvlink.py``). Raw input → :mod:`model.counters`, nothing else.

What cannot be read is a ``record-incomplete`` finding, never an exception: the hooks that
read this run in Slurm's Prolog and Epilog, where a crash would drain the node.
"""

from __future__ import annotations

import re
from pathlib import Path

from topograph_slurm.model.counters import ERROR_COUNTERS, NodeCounters, NvlinkReading, PortReading
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.names import natural_key
from topograph_slurm.model.numbers import natural
from topograph_slurm.model.result import Finding

#: sysfs's rate file: ``400 Gb/sec (4X NDR)``; an SDR-era kernel prints ``10 Gb/sec (4X)``.
_RATE = re.compile(r"\((\d{1,3})X(?: ([A-Z0-9]{2,6}))?\)", re.ASCII)
#: ``nvidia-smi nvlink -e``: a GPU header, then ``Link <n>: <counter>: <value>`` lines.
_GPU = re.compile(r"^GPU (\d{1,4}): ", re.ASCII)
_LINK = re.compile(r"^\s*Link (\d{1,3}): ([A-Za-z][A-Za-z0-9 ]{0,40}?)\s*: (\S+)\s*$", re.ASCII)
#: Longest sysfs value read: a counter is at most 20 digits, a rate line some 30 characters.
_MAX_READ = 256


def read_sysfs(root: Path, node: str) -> NodeCounters:
    """Every port of every device under *root*, naturally sorted; what is missing or
    unreadable is one finding per port (or one for the tree) about *node*."""
    try:
        devices = sorted(
            (d for d in root.iterdir() if d.is_dir()), key=lambda d: natural_key(d.name)
        )
    except OSError as err:
        return NodeCounters(
            findings=(_incomplete(node, f"no InfiniBand sysfs tree at {root}: {_why(err)}"),)
        )
    ports: list[PortReading] = []
    findings: list[Finding] = []
    for device in devices:
        for port_dir in _ports(device):
            port, missing = read_port(device.name, port_dir)
            ports.append(port)
            if missing:
                findings.append(
                    _incomplete(node, f"{port.name}: could not read {', '.join(missing)}")
                )
    return NodeCounters(ports=tuple(ports), findings=tuple(findings))


def read_port(device: str, port_dir: Path) -> tuple[PortReading, list[str]]:
    """One port's reading and the names of the files it could not read (or not as a
    number: ``N/A (no PMA)`` is what iWARP devices print)."""
    counters: dict[str, int] = {}
    missing: list[str] = []
    for name in ERROR_COUNTERS:
        value = natural(_read(port_dir / "counters" / name) or "")
        if value is None:
            missing.append(f"counters/{name}")
        else:
            counters[name] = value
    texts = {name: _read(port_dir / name) for name in ("rate", "state", "phys_state", "link_layer")}
    missing += [name for name, text in texts.items() if text is None]
    width, speed = parse_rate(texts["rate"] or "")
    reading = PortReading(
        device,
        port_dir.name,
        counters,
        width,
        speed,
        _state(texts["state"]),
        _state(texts["phys_state"]),
        (texts["link_layer"] or "").strip(),
    )
    return reading, missing


def parse_rate(text: str) -> tuple[str, str]:
    """``400 Gb/sec (4X NDR)`` → ``("4x", "NDR")``; ``("", "")`` when the text has no
    width (an unknown rate)."""
    match = _RATE.search(text)
    if match is None:
        return "", ""
    return f"{int(match.group(1))}x", match.group(2) or ""


def parse_nvlink_errors(text: str) -> tuple[NvlinkReading, ...]:
    """``nvidia-smi nvlink -e``'s counters per GPU and link, in the order printed; a value
    that is not a number (``N/A``) is left out."""
    found: dict[tuple[int, int], dict[str, int]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        header = _GPU.match(line)
        if header:
            gpu = int(header.group(1))
            continue
        row = _LINK.match(line)
        value = natural(row.group(3)) if row else None
        if row and gpu is not None and value is not None:
            found.setdefault((gpu, int(row.group(1))), {})[row.group(2)] = value
    return tuple(NvlinkReading(g, link, counters) for (g, link), counters in found.items())


def _ports(device: Path) -> list[Path]:
    try:
        ports = [p for p in (device / "ports").iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(ports, key=lambda p: natural_key(p.name))


def _read(path: Path) -> str | None:
    """A sysfs file's text, or None when it cannot be read (absent, no permission, EIO)."""
    try:
        with path.open("rb") as handle:
            return handle.read(_MAX_READ).decode("ascii", "replace")
    except OSError:
        return None


def _state(text: str | None) -> str:
    """``4: ACTIVE`` → ``ACTIVE`` (sysfs prints the number and the name)."""
    return (text or "").split(":", 1)[-1].strip()


def _incomplete(node: str, message: str) -> Finding:
    return Finding(FindingKind.RECORD_INCOMPLETE, node, message)


def _why(err: OSError) -> str:
    return err.strerror or type(err).__name__
