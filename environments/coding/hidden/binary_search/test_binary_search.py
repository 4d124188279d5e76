import pytest
from solution import binary_search


@pytest.mark.parametrize(
    ("items", "target", "expected"),
    [
        ([1, 2, 2, 2, 3], 2, 1),
        ([1, 3, 5], 4, -1),
        ([1, 3, 5], 1, 0),
        ([1, 3, 5], 5, 2),
        ([], 1, -1),
        ([7], 7, 0),
        ([7], 8, -1),
        ([2, 2, 2, 2], 2, 0),
        ([-5, -2, 0, 0, 9], 0, 2),
        ([1, 2, 3], 0, -1),
        ([1, 2, 3], 4, -1),
    ],
)
def test_binary_search(items, target, expected):
    assert binary_search(items, target) == expected


def test_many_lookups_in_a_large_list():
    items = [i // 3 for i in range(1_000_000)]
    for target in range(0, 333_333, 331):
        assert binary_search(items, target) == 3 * target
    assert binary_search(items, -1) == -1
    assert binary_search(items, 333_334) == -1
