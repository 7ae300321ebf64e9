"""Link rates: the one table of InfiniBand widths and signalling speeds, and the one ``slower``.

ibnetdiscover prints a cable's rate as ``4xNDR`` (width ``4x``, speed ``NDR``), UFM as separate
width and speed fields; both sources, the health findings and the pictures compare rates, and a
degraded end must never hide behind a healthy one, so every comparison goes through here.

A speed's place in :data:`SPEEDS` is its order; :data:`LANE_GBPS` is the data rate per lane
after line encoding (QDR's 10 Gb/s signalling carries 8 Gb/s, FDR10's 10.3125 carries 10), which
keeps every step strictly faster than the one before. ``???`` is what ibnetdiscover prints for
an inactive or unknown rate: it is slower than everything.
"""

from __future__ import annotations

import re

UNKNOWN = "???"
#: A lane count as text: ASCII digits, few of them (``str.isdigit`` takes "٤" and "²", and
#: ``int`` refuses more than 4,300 digits with a ValueError).
LANE_COUNT = re.compile(r"[0-9]{1,3}")

#: Per-lane data rate (Gb/s) of each signalling speed, slowest first.
LANE_GBPS: dict[str, float] = {
    "SDR": 2.0,
    "DDR": 4.0,
    "QDR": 8.0,
    "FDR10": 10.0,
    "FDR": 13.64,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
    "GDR": 400.0,
}
SPEEDS: tuple[str, ...] = tuple(LANE_GBPS)
#: Every speed name a source may report, the unknown ``???`` included.
KNOWN_SPEEDS = frozenset({*SPEEDS, UNKNOWN})

_RANK = {name: rank for rank, name in enumerate(SPEEDS, start=1)}


def lanes(width: str) -> int:
    """``4x`` → 4; an unknown width (``???``, empty) → 0."""
    digits = width.lower().rstrip("x")
    return int(digits) if LANE_COUNT.fullmatch(digits) else 0


def speed_rank(speed: str) -> int:
    """A speed's order, 1 for SDR upwards; 0 for ``???`` and names no source defines."""
    return _RANK.get(speed, 0)


def is_rated(width: str, speed: str) -> bool:
    """Whether the width and speed are both known, so the rate can be judged."""
    return speed in _RANK and lanes(width) > 0


def gbps(width: str, speed: str) -> float:
    """The link's data rate in Gb/s (lanes × per-lane rate); 0 when either part is unknown."""
    return lanes(width) * LANE_GBPS.get(speed, 0.0)


def slower(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """The (width, speed) that carries less; *a* on a tie. A cable whose two ends report
    different rates runs at the slower one, so that is the one to keep."""
    return a if (gbps(*a), speed_rank(a[1])) <= (gbps(*b), speed_rank(b[1])) else b


def slower_speed(a: str, b: str) -> str:
    """The slower of two speed names (*a* on a tie), for sources that report speed per port
    and width per cable."""
    return a if speed_rank(a) <= speed_rank(b) else b
