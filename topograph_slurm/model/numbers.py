"""Numbers written as text (a port, a LID, a size), checked before ``int()`` sees them.

``str.isdigit`` is true for ``²`` (which ``int`` refuses with a ValueError) and for ``٤`` (which
``int`` reads as 4), and ``int`` refuses more than 4,300 digits: a reader that checks with
``isdigit`` and converts with ``int`` crashes (exit 70) on the first and accepts the second.
Every reader of a number from outside asks :func:`natural` instead.
"""

from __future__ import annotations

import re

#: Plain ASCII digits, few enough that no source's number (a 64-bit counter at most) is cut.
_DIGITS = re.compile(r"\s*([0-9]{1,20})\s*")


def natural(text: str) -> int | None:
    """*text* as a non-negative integer when it is 1-20 ASCII digits (blanks around them
    allowed), else None."""
    m = _DIGITS.fullmatch(text)
    return int(m.group(1)) if m else None
