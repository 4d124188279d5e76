import math

import pytest
from solution import pascal_row


def test_small_rows():
    assert pascal_row(0) == [1]
    assert pascal_row(1) == [1, 1]
    assert pascal_row(2) == [1, 2, 1]
    assert pascal_row(4) == [1, 4, 6, 4, 1]


def test_large_row_is_exact():
    assert pascal_row(60) == [math.comb(60, k) for k in range(61)]


def test_negative():
    with pytest.raises(ValueError):
        pascal_row(-1)
