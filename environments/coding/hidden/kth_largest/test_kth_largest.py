import pytest
from solution import kth_largest


@pytest.mark.parametrize(
    ("nums", "k", "expected"),
    [
        ([3, 2, 1, 5, 6, 4], 2, 5),
        ([3, 2, 3, 1, 2, 4, 5, 5, 6], 4, 4),
        ([1], 1, 1),
        ([-1, -1], 2, -1),
        ([5, 5, 5], 3, 5),
        ([2, 9, 4], 3, 2),
    ],
)
def test_kth_largest(nums, k, expected):
    assert kth_largest(nums, k) == expected


@pytest.mark.parametrize(("nums", "k"), [([1, 2], 3), ([1, 2], 0), ([], 1), ([1], -1)])
def test_bad_k(nums, k):
    with pytest.raises(ValueError):
        kth_largest(nums, k)


def test_input_is_not_modified():
    nums = [3, 1, 2]
    kth_largest(nums, 1)
    assert nums == [3, 1, 2]
