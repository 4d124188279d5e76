from matrixlite import matmul, shape, transpose


def test_transpose_wide_and_tall():
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]
    assert transpose([[1], [2], [3]]) == [[1, 2, 3]]


def test_transpose_twice_is_identity():
    m = [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert transpose(transpose(m)) == m
    assert shape(transpose(m)) == (4, 2)


def test_matmul_non_square():
    assert matmul([[1, 2, 3], [4, 5, 6]], [[7, 8], [9, 10], [11, 12]]) == [[58, 64], [139, 154]]


def test_row_times_column():
    assert matmul([[1, 2, 3]], [[4], [5], [6]]) == [[32]]
    assert matmul([[4], [5]], [[1, 2]]) == [[4, 8], [5, 10]]
