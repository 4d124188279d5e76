import pytest
from solution import rotate


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (0, [1, 2, 3, 4, 5]),
        (1, [5, 1, 2, 3, 4]),
        (2, [4, 5, 1, 2, 3]),
        (5, [1, 2, 3, 4, 5]),
        (7, [4, 5, 1, 2, 3]),
        (-1, [2, 3, 4, 5, 1]),
        (-6, [2, 3, 4, 5, 1]),
    ],
)
def test_rotate(k, expected):
    assert rotate([1, 2, 3, 4, 5], k) == expected


def test_empty_and_single():
    assert rotate([], 3) == []
    assert rotate([1], 100) == [1]


def test_input_is_not_modified():
    data = [1, 2, 3]
    result = rotate(data, 1)
    assert data == [1, 2, 3] and result is not data
