"""Cyclic garbage collection paused while a fabric is read and analysed.

A large fabric is a batch of ~1M short-lived and long-lived objects that form no cycles worth
collecting: with collection on, the young generation fills dozens of times and each pass walks
it. Afterwards the caller's setting comes back, and what the batch built goes straight to the
oldest generation (``freeze`` then ``unfreeze``), as surviving collections would have moved it:
otherwise the first collection after the pause walks every object of the run (a 16,384-node
fabric's, measured in benchmarks/PERFORMANCE.md) only to keep them all. Cycles among them
remain collectable by a full collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Collection off inside; back to what it was afterwards, so an in-process caller (tests,
    a site's wrapper) keeps its own setting. Nested uses restore only at the outermost."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()  # every tracked object to the permanent generation, unscanned,
            gc.unfreeze()  # and from there to the oldest one, where full collections see them
            gc.enable()
