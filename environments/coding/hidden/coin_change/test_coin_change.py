import pytest
from solution import min_coins


@pytest.mark.parametrize(
    ("coins", "amount", "expected"),
    [
        ([1, 2, 5], 11, 3),
        ([2], 3, -1),
        ([1], 0, 0),
        ([], 0, 0),
        ([], 5, -1),
        ([3, 7], 1, -1),
        ([1, 5, 10, 25], 63, 6),
        ([1, 3, 4], 6, 2),
        ([186, 419, 83, 408], 6249, 20),
        ([7], 10_000, -1),
        ([2, 5, 10, 1], 10_000, 1000),
    ],
)
def test_min_coins(coins, amount, expected):
    assert min_coins(coins, amount) == expected
