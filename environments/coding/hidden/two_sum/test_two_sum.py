import pytest
from solution import two_sum


@pytest.mark.parametrize(
    ("nums", "target", "expected"),
    [
        ([2, 7, 11, 15], 9, (0, 1)),
        ([3, 2, 4], 6, (1, 2)),
        ([3, 3], 6, (0, 1)),
        ([1, 5, 1, 5], 6, (0, 1)),
        ([5, 1, 1, 5], 2, (1, 2)),
        ([0, -3, 3, 0], 0, (1, 2)),
        ([4, 1, 2, 4], 8, (0, 3)),
    ],
)
def test_two_sum(nums, target, expected):
    assert tuple(two_sum(nums, target)) == expected


@pytest.mark.parametrize(("nums", "target"), [([1, 2, 3], 7), ([], 0), ([5], 10), ([1, 1], 3)])
def test_no_pair(nums, target):
    assert two_sum(nums, target) is None


def test_large_input():
    nums = list(range(100_000))
    assert tuple(two_sum(nums, 199_997)) == (99_998, 99_999)
    assert two_sum(nums, 10**9) is None
