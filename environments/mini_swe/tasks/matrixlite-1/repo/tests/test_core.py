import pytest

from matrixlite import add, identity, scale, shape, transpose, zeros


def test_shape():
    assert shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)
    assert shape([]) == (0, 0)
    with pytest.raises(ValueError):
        shape([[1, 2], [3]])


def test_zeros_and_identity():
    assert zeros(2, 3) == [[0, 0, 0], [0, 0, 0]]
    assert identity(2) == [[1, 0], [0, 1]]


def test_transpose_square():
    assert transpose([[1, 2], [3, 4]]) == [[1, 3], [2, 4]]
    assert transpose([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == [[1, 4, 7], [2, 5, 8], [3, 6, 9]]


def test_transpose_single_element_and_empty():
    assert transpose([[5]]) == [[5]]
    assert transpose([]) == []


def test_add_and_scale():
    assert add([[1, 2]], [[3, 4]]) == [[4, 6]]
    assert scale([[1, 2], [3, 4]], 2) == [[2, 4], [6, 8]]
    with pytest.raises(ValueError):
        add([[1, 2]], [[1], [2]])
