"""Cables as every parser of this package collects them, and the width+speed tokens they carry.

A parser keys each cable by its two ends in canonical order, ``(GUID, port, GUID, port)``, and
keeps the token ibnetdiscover printed for it (``4xNDR``); :class:`Links` gets the width and the
speed apart, each token split once however many cables share it.
"""

from __future__ import annotations

from topograph_slurm.model import rates
from topograph_slurm.model.fabric import Links

#: A cable's two ends (the smaller first) → its width+speed token.
Cables = dict[tuple[str, int, str, int], str]

#: ``ibnetdiscover -p`` of older infiniband-diags prints rates instead of speed names.
RATE_NAMES = {"2.5 Gbps": "SDR", "5.0 Gbps": "DDR", "10.0 Gbps": "QDR", "14.0625 Gbps": "FDR"}


def split_width_speed(text: str) -> tuple[str, str]:
    """``4xNDR`` / ``4x EDR`` / ``1xSDR`` / ``4x ???`` → (``4x``, ``NDR``)."""
    width, x, speed = text.strip().partition("x")
    if not x:
        return "", text.strip()
    speed = speed.strip()
    return width + "x", RATE_NAMES.get(speed, speed)


def slower_token(a: str, b: str) -> str:
    """The slower of two width+speed tokens (*a* on a tie), so a degraded end is never
    hidden."""
    rate_a = split_width_speed(a)
    return a if rates.slower(rate_a, split_width_speed(b)) is rate_a else b


def build_links(cables: Cables) -> Links:
    """One row per cable (keys already in canonical end order), in first-seen order."""
    if not cables:
        return Links()
    a, a_port, b, b_port = (list(col) for col in zip(*cables, strict=True))
    return links_from_columns(a, a_port, b, b_port, list(cables.values()))


def links_from_columns(
    a: list[str], a_port: list[int], b: list[str], b_port: list[int], ws: list[str]
) -> Links:
    """Links from columns; width+speed strings are split once per distinct value, and when
    every cable has the same one (a fabric of one rate, the common case) the two columns are
    that value repeated, not looked up cable by cable."""
    tokens = set(ws)
    if len(tokens) == 1:
        width, speed = split_width_speed(ws[0])
        return Links(a, a_port, b, b_port, [width] * len(ws), [speed] * len(ws))
    widths = {w: split_width_speed(w)[0] for w in tokens}
    speeds = {w: split_width_speed(w)[1] for w in widths}
    return Links(
        a, a_port, b, b_port, list(map(widths.__getitem__, ws)), list(map(speeds.__getitem__, ws))
    )
