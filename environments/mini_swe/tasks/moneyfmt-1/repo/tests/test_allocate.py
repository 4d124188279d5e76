import pytest

from moneyfmt import allocate


def test_even_split():
    assert allocate(90, [1, 1, 1]) == [30, 30, 30]


def test_remainder_goes_first():
    assert allocate(100, [1, 1, 1]) == [34, 33, 33]


def test_weighted():
    assert allocate(1000, [70, 30]) == [700, 300]


@pytest.mark.parametrize("ratios", [[], [0, 0], [1, -1]])
def test_bad_ratios(ratios):
    with pytest.raises(ValueError):
        allocate(100, ratios)
