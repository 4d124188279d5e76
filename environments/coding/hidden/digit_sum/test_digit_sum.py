import pytest
from solution import digit_sum


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, 0), (7, 7), (123, 6), (-456, 15), (10**20, 1), (9999, 36), (-1, 1), (2**100, 115)],
)
def test_digit_sum(n, expected):
    assert digit_sum(n) == expected
