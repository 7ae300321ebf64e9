"""Numbers written as text (a port, a LID, a size), checked before ``int()`` sees them.

``str.isdigit`` is true for ``²`` (which ``int`` refuses with a ValueError) and for ``٤`` (which
``int`` reads as 4), and ``int`` refuses more than 4,300 digits: a reader that checks with
``isdigit`` and converts with ``int`` crashes (exit 70) on the first and accepts the second.
Every reader of a number from outside asks :func:`natural` (a fraction: :func:`decimal`)
instead.
"""

from __future__ import annotations

import math
import re

#: Most digits read: a 64-bit counter has 20; ``int`` of thousands would be slow or refused.
MAX_DIGITS = 20


def natural(text: str) -> int | None:
    """*text* as a non-negative integer when it is 1-20 ASCII digits (blanks around them
    allowed), else None. (``isascii`` and ``isdigit`` together are exactly 0-9, and cheaper
    than a regular expression: LIDs and ports are read by the hundred thousand.)"""
    digits = text.strip()
    ok = digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS
    return int(digits) if ok else None


#: A decimal number as measuring tools print it: ASCII digits, a point, an exponent.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?", re.ASCII)


def decimal(text: str) -> float | None:
    """*text* as a finite float when it is a plain ASCII decimal (``12.5``, ``1e3``), else
    None: ``float`` also reads ``nan``, ``inf``, ``1e309`` (inf), ``1_0`` and ``٧``."""
    digits = text.strip()
    if _DECIMAL.fullmatch(digits) is None:
        return None
    value = float(digits)
    return value if math.isfinite(value) else None
