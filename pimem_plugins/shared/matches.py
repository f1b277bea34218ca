"""The one match of a lookup that must pick exactly one thing (an entry, a compact block, a
transcript entry), or the error that says why it cannot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pimem_core.plugin import PimemError

T = TypeVar("T")


def one_match(found: Sequence[T], *, missing: PimemError, ambiguous: PimemError) -> T:
    """The only item of *found*; raise *missing* when it holds none, *ambiguous* when more."""
    if not found:
        raise missing
    if len(found) > 1:
        raise ambiguous
    return found[0]
