"""Split an amount by ratios without losing or inventing a cent."""

from __future__ import annotations


def allocate(minor_units: int, ratios: list[int]) -> list[int]:
    """Split `minor_units` in proportion to `ratios`; leftover units go to the first shares.

    The parts always sum to `minor_units`.
    """
    if not ratios or any(r < 0 for r in ratios) or sum(ratios) == 0:
        raise ValueError("ratios must be non-negative and not all zero")
    total = sum(ratios)
    parts = [minor_units * r // total for r in ratios]
    remainder = minor_units - sum(parts)
    for i in range(remainder):
        parts[i % len(parts)] += 1
    return parts
