"""The entry point: detect the dump's format, read it in bulk, fall back to the reference parser.

A dump is read the fast way (:mod:`.bulk`) when it is regular and line by line
(:mod:`.reference`) when it is not; both give the same Fabric, so the fallback only changes
how long it takes and who explains what is wrong. ``-p`` reports have a parser of their own
(:mod:`.ports`).
"""

from __future__ import annotations

from pathlib import Path

from topograph_slurm.model.fabric import Fabric
from topograph_slurm.sources.gc_pause import no_cyclic_gc
from topograph_slurm.sources.ibnetdiscover import bulk, ports, reference


def parse_ibnetdiscover(text: str, source: str = "") -> Fabric:
    """Parse ibnetdiscover output (plain, ``-g`` or ``-p``; detected) into a Fabric.

    Raises ParseError (with the line number where one applies) for input that is not an
    ibnetdiscover dump, is truncated, contains binary data or declares one GUID twice with
    different contents. Non-fatal oddities become ``fabric.notes``.
    """
    # Millions of short-lived tuples would trigger full collections over and over; nothing
    # built here has reference cycles, so collecting afterwards is enough.
    with no_cyclic_gc():
        if ports.is_ports_format(text):
            return ports.parse(text, source)
        reference.check_last_line(text, source)
        fabric = bulk.parse(text, source)
        if fabric is None:  # anything unusual: the line-by-line parser decides and explains
            fabric = reference.parse(text, source)
        return fabric


def read_ibnetdiscover(path: str | Path) -> Fabric:
    """Parse a saved dump; undecodable bytes become U+FFFD rather than a UnicodeDecodeError."""
    data = Path(path).read_bytes()
    return parse_ibnetdiscover(data.decode("utf-8", errors="replace"), source=str(path))
