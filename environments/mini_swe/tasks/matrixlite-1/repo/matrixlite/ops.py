"""Products and reductions."""

from __future__ import annotations

from collections.abc import Sequence

from .core import Matrix, identity, shape, transpose


def dot(u: Sequence[float], v: Sequence[float]) -> float:
    if len(u) != len(v):
        raise ValueError(f"vectors of different lengths: {len(u)} and {len(v)}")
    return sum(x * y for x, y in zip(u, v))


def matmul(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Matrix:
    """The matrix product a·b of an (n, k) and a (k, m) matrix: an (n, m) matrix."""
    (_, inner_a), (inner_b, _) = shape(a), shape(b)
    if inner_a != inner_b:
        raise ValueError(f"cannot multiply {shape(a)} by {shape(b)}: inner dimensions differ")
    columns = transpose(b)
    return [[dot(row, col) for col in columns] for row in a]


def power(m: Sequence[Sequence[float]], n: int) -> Matrix:
    """m multiplied by itself n times (n >= 0; the identity for n == 0)."""
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("power needs a square matrix")
    if n < 0:
        raise ValueError("n must be non-negative")
    result = identity(rows)
    for _ in range(n):
        result = matmul(result, m)
    return result


def trace(m: Sequence[Sequence[float]]) -> float:
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("trace needs a square matrix")
    return sum(m[i][i] for i in range(rows))


def determinant(m: Sequence[Sequence[float]]) -> float:
    """By Gaussian elimination with partial pivoting."""
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("determinant needs a square matrix")
    a = [[float(x) for x in row] for row in m]
    det = 1.0
    for i in range(rows):
        pivot = max(range(i, rows), key=lambda r: abs(a[r][i]))
        if abs(a[pivot][i]) < 1e-12:
            return 0.0
        if pivot != i:
            a[i], a[pivot] = a[pivot], a[i]
            det = -det
        det *= a[i][i]
        for r in range(i + 1, rows):
            factor = a[r][i] / a[i][i]
            for c in range(i, rows):
                a[r][c] -= factor * a[i][c]
    return det
