"""Building blocks: shapes, constructors and element-wise operations."""

from __future__ import annotations

from collections.abc import Sequence

Matrix = list[list[float]]


def shape(m: Sequence[Sequence[float]]) -> tuple[int, int]:
    """(rows, columns). Every row must have the same length."""
    rows = len(m)
    cols = len(m[0]) if rows else 0
    if any(len(row) != cols for row in m):
        raise ValueError("ragged matrix: rows have different lengths")
    return rows, cols


def zeros(rows: int, cols: int) -> Matrix:
    return [[0] * cols for _ in range(rows)]


def identity(n: int) -> Matrix:
    return [[1 if r == c else 0 for c in range(n)] for r in range(n)]


def transpose(m: Sequence[Sequence[float]]) -> Matrix:
    """Rows become columns: element (r, c) moves to (c, r)."""
    cols, rows = shape(m)
    return [[m[r][c] for r in range(rows)] for c in range(cols)]


def add(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Matrix:
    if shape(a) != shape(b):
        raise ValueError(f"cannot add {shape(a)} and {shape(b)} matrices")
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def scale(m: Sequence[Sequence[float]], factor: float) -> Matrix:
    return [[x * factor for x in row] for row in m]
