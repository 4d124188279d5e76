import pytest
from solution import second_largest


@pytest.mark.parametrize(
    ("nums", "expected"),
    [
        ([1, 2, 3], 2),
        ([3, 3, 2], 2),
        ([10, 9, 10, 8], 9),
        ([-1, -5, -3], -3),
        ([2, 1], 1),
        ([7, 7, 7, 6, 7], 6),
    ],
)
def test_second_largest(nums, expected):
    assert second_largest(nums) == expected


@pytest.mark.parametrize("nums", [[], [5], [4, 4], [0, 0, 0]])
def test_none_without_two_distinct_values(nums):
    assert second_largest(nums) is None


def test_input_is_not_modified():
    nums = [3, 1, 2]
    second_largest(nums)
    assert nums == [3, 1, 2]
