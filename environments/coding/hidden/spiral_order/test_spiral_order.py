import pytest
from solution import spiral_order


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        ([[1, 2, 3], [4, 5, 6], [7, 8, 9]], [1, 2, 3, 6, 9, 8, 7, 4, 5]),
        ([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7]),
        ([[1, 2, 3]], [1, 2, 3]),
        ([[1], [2], [3]], [1, 2, 3]),
        ([[1, 2], [3, 4], [5, 6], [7, 8]], [1, 2, 4, 6, 8, 7, 5, 3]),
        ([[7]], [7]),
        ([], []),
        ([[]], []),
    ],
)
def test_spiral_order(matrix, expected):
    assert spiral_order(matrix) == expected


def test_input_is_not_modified():
    matrix = [[1, 2], [3, 4]]
    spiral_order(matrix)
    assert matrix == [[1, 2], [3, 4]]


def test_large_matrix_visits_every_element_once():
    matrix = [[r * 50 + c for c in range(50)] for r in range(40)]
    out = spiral_order(matrix)
    assert sorted(out) == list(range(2000)) and out[:50] == list(range(50))
