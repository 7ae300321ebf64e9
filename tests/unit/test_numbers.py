"""Numbers and GUIDs read from text: ASCII digits only, bounded before ``int()`` sees them.

``str.isdigit`` and ``int`` both take characters no fabric tool prints (``٤`` is 4 to ``int``,
``²`` is a digit to ``isdigit`` and a ValueError to ``int``, ``1_0`` is 10 to ``int``); each
such text is refused here, as every malformed number is.
"""

from __future__ import annotations

import pytest

from topograph_slurm.model.fabric import normalize_guid
from topograph_slurm.model.numbers import decimal, natural
from topograph_slurm.model.rates import lanes

ODD_DIGITS = ["\u0664", "\u00b2", "1_0", "+1", "-1", "", " ", "1 0", "9" * 5000, "\uff11"]


@pytest.mark.parametrize("text", ODD_DIGITS)
def test_natural_refuses_anything_but_ascii_digits(text: str) -> None:
    assert natural(text) is None


def test_natural_reads_plain_numbers_with_blanks_around() -> None:
    assert [natural(t) for t in ("0", "7", " 42 ", "65535\n")] == [0, 7, 42, 65535]
    assert natural("9" * 20) == 10**20 - 1 and natural("9" * 21) is None


@pytest.mark.parametrize("text", ODD_DIGITS)
def test_lanes_of_an_odd_width_is_unknown(text: str) -> None:
    assert lanes(text + "x") == 0


def test_lanes_of_real_widths() -> None:
    assert [lanes(w) for w in ("1x", "4x", "12X", "8", "???", "x")] == [1, 4, 12, 8, 0, 0]


@pytest.mark.parametrize(
    "text", ["00_02c9", "0x_1", "\u0663", "0x\u0661\u0662", "-1f", "+1f", "0x", "1" * 17, "g1"]
)
def test_normalize_guid_refuses_what_int_would_take(text: str) -> None:
    with pytest.raises(ValueError, match="not a 64-bit GUID"):
        normalize_guid(text)


def test_normalize_guid_of_real_forms() -> None:
    expected = "0008f10403960984"
    for text in ("0x8f10403960984", "H-0008f10403960984", "S-0008F10403960984", " 8f10403960984 "):
        assert normalize_guid(text) == expected


@pytest.mark.parametrize(
    "text",
    ["nan", "inf", "-inf", "1e309", "Infinity", "1_0.5", "\u0663.5", "\uff11", "", "1e", "."],
)
def test_decimal_refuses_what_float_would_take_or_make_infinite(text: str) -> None:
    assert decimal(text) is None


def test_decimal_reads_what_measuring_tools_print() -> None:
    assert [decimal(t) for t in ("338.82", " 0 ", "-1", "1e3", ".5", "2.")] == [
        338.82,
        0.0,
        -1.0,
        1000.0,
        0.5,
        2.0,
    ]
