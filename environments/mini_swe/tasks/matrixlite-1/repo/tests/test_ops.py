import pytest

from matrixlite import determinant, dot, identity, matmul, power, trace


def test_dot():
    assert dot([1, 2, 3], [4, 5, 6]) == 32
    with pytest.raises(ValueError):
        dot([1], [1, 2])


def test_matmul_square():
    assert matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]


def test_matmul_identity():
    m = [[2, -1, 0], [1, 3, 5], [0, 4, 1]]
    assert matmul(m, identity(3)) == m
    assert matmul(identity(3), m) == m


def test_matmul_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul([[1, 2, 3]], [[1, 2, 3]])


def test_power():
    assert power([[1, 1], [1, 0]], 5) == [[8, 5], [5, 3]]
    assert power([[2, 0], [0, 2]], 0) == [[1, 0], [0, 1]]


def test_trace():
    assert trace([[1, 2], [3, 4]]) == 5


def test_determinant():
    assert determinant([[2, 0], [1, 3]]) == pytest.approx(6.0)
    assert determinant([[0, 1], [1, 0]]) == pytest.approx(-1.0)
    assert determinant([[1, 2], [2, 4]]) == 0.0
    assert determinant([[6, 1, 1], [4, -2, 5], [2, 8, 7]]) == pytest.approx(-306.0)
