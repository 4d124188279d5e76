"""Operations on lists of closed intervals."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def _checked(interval: Iterable[float]) -> Interval:
    start, end = interval
    if start > end:
        raise ValueError(f"interval start {start} is after its end {end}")
    return (start, end)


def merge(intervals: Iterable[Iterable[float]]) -> list[Interval]:
    """Disjoint intervals sorted by start, covering exactly what `intervals` cover.

    Overlapping or touching intervals are joined.
    """
    items = sorted((_checked(i) for i in intervals), key=lambda iv: iv[1])
    merged: list[Interval] = []
    for start, end in items:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: Iterable[Iterable[float]]) -> float:
    """Length of the union of `intervals` (overlaps counted once)."""
    return sum(end - start for start, end in merge(intervals))


def contains(intervals: Iterable[Iterable[float]], point: float) -> bool:
    return any(start <= point <= end for start, end in merge(intervals))


def intersect(a: Iterable[Iterable[float]], b: Iterable[Iterable[float]]) -> list[Interval]:
    """What both `a` and `b` cover."""
    left, right = merge(a), merge(b)
    out: list[Interval] = []
    i = j = 0
    while i < len(left) and j < len(right):
        start = max(left[i][0], right[j][0])
        end = min(left[i][1], right[j][1])
        if start <= end:
            out.append((start, end))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return out


def gaps(intervals: Iterable[Iterable[float]]) -> list[Interval]:
    """The holes between the merged intervals."""
    merged = merge(intervals)
    return [(merged[k][1], merged[k + 1][0]) for k in range(len(merged) - 1)]
