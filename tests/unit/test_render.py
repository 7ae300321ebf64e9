"""Hostlist folding: ClusterShell's own ``fromlist`` is the reference for the grouped fast path."""

from __future__ import annotations

import re

from ClusterShell.NodeSet import NodeSet
from hypothesis import given
from hypothesis import strategies as st

from topograph_slurm.model.names import fold as hostlist


def _reference(names: list[str]) -> str:
    nodes = NodeSet.fromlist(names)
    nodes.fold_axis = [-1]
    return str(nodes)


def test_folds_on_the_last_number_only_with_padding_kept() -> None:
    names = ["gpu0003", "gpu0001", "gpu0002", "rack1-n1", "rack2-n1", "rack1-n2", "login"]
    assert hostlist(names) == "gpu[0001-0003],login,rack1-n[1-2],rack2-n1"


def test_mixed_padding_and_suffixes() -> None:
    assert hostlist(["n1", "n01", "n2", "a1b", "a2b", "a2c"]) == "a[1-2]b,a2c,n[1-2,01]"


def test_names_with_hostlist_syntax_take_clustershell_parser() -> None:
    assert hostlist(["gpu[1-2]", "gpu3"]) == "gpu[1-3]"


def test_empty() -> None:
    assert hostlist([]) == ""


_PLAIN = st.from_regex(r"[a-z_.-]{0,3}[0-9]{0,3}([a-z_.-]{1,2}[0-9]{1,3})?", fullmatch=True)


_TOP_LEVEL_COMMA = re.compile(r",(?![^\[]*\])")


@given(st.lists(_PLAIN.filter(bool), max_size=40))
def test_grouped_path_folds_like_clustershell_fromlist(names: list[str]) -> None:
    """The same ranges as ClusterShell's own parser; only the order of patterns whose prefix
    holds other numbers (``0_0`` vs ``00_0``) may differ, and it is still deterministic."""
    ours = hostlist(names)
    assert sorted(_TOP_LEVEL_COMMA.split(ours)) == sorted(_TOP_LEVEL_COMMA.split(_reference(names)))
    assert ours == hostlist(reversed(names))
