"""Read ``ibnetdiscover`` output (plain, grouped ``-g`` and ports ``-p`` formats) into a Fabric.

- :mod:`.parse`: the entry point; detects the format, tries the bulk path, falls back.
- :mod:`.reference`: the line-by-line parser, the oracle: simple, slow, and it explains.
- :mod:`.bulk`: the fast path for regular dumps (whole-chunk regexes, a forked second share,
  both ends of every cable cross-checked by summed hashes); it gives the reference's Fabric or
  declines.
- :mod:`.ports`: the ``-p`` ports report.
- :mod:`.links`: the cable table all of them fill, and the width+speed tokens it holds.
- :mod:`.command`: running the live ``ibnetdiscover``.
- :mod:`.fork`: one pure function in a forked child, for the bulk path.
"""

from __future__ import annotations

from topograph_slurm.sources.ibnetdiscover.command import run_ibnetdiscover
from topograph_slurm.sources.ibnetdiscover.links import split_width_speed
from topograph_slurm.sources.ibnetdiscover.parse import parse_ibnetdiscover, read_ibnetdiscover

__all__ = ["parse_ibnetdiscover", "read_ibnetdiscover", "run_ibnetdiscover", "split_width_speed"]
