"""The fabric's cables as columns: rows in either end order, Link tuples in canonical order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from topograph_slurm.model.fabric import Link, Links

_GUIDS = st.sampled_from(["0000000000000001", "00000000000000aa", "2c5eab0300b87b40"])
_ROWS = st.lists(
    st.tuples(
        _GUIDS,
        st.integers(1, 64),
        _GUIDS,
        st.integers(1, 64),
        st.sampled_from(["4x", "1x"]),
        st.sampled_from(["NDR", "SDR"]),
    ),
    max_size=20,
)


_Row = tuple[str, int, str, int, str, str]


@given(_ROWS)
def test_rows_in_either_order_read_back_canonical(rows: list[_Row]) -> None:
    links = Links()
    for row in rows:
        links.append(Link(*row))  # as a source stores it: whichever end it read first
    expected = [Link.between(*row) for row in rows]
    assert len(links) == len(rows)
    assert list(links) == expected
    assert [links[i] for i in range(len(rows))] == expected
    assert Links.of(expected) == Links.of(list(links))
    assert all((k.a_guid, k.a_port) <= (k.b_guid, k.b_port) for k in links)


def test_columns_are_the_link_fields() -> None:
    link = Link("00000000000000aa", 3, "0000000000000001", 7, "4x", "NDR")
    links = Links.of([link])
    assert links.columns() == (
        ["00000000000000aa"],
        [3],
        ["0000000000000001"],
        [7],
        ["4x"],
        ["NDR"],
    )
    assert links[0] == Link("0000000000000001", 7, "00000000000000aa", 3, "4x", "NDR")
    assert Links.of([]) == Links() and list(Links()) == []


def test_known_end_kinds_are_dropped_by_append_and_ignored_by_equality() -> None:
    link = Link("0000000000000001", 7, "00000000000000aa", 3, "4x", "NDR")
    links = Links.of([link])
    links.b_switch = [False]
    assert links == Links.of([link]), "the hint restates the devices: not part of equality"
    links.append(link)
    assert links.b_switch is None, "a row added without kinds leaves them unknown"
