import random

import pytest
from solution import sliding_window_max


@pytest.mark.parametrize(
    ("nums", "k", "expected"),
    [
        ([1, 3, -1, -3, 5, 3, 6, 7], 3, [3, 3, 5, 5, 6, 7]),
        ([1], 1, [1]),
        ([1, 2], 3, []),
        ([], 1, []),
        ([9, 8, 7], 1, [9, 8, 7]),
        ([1, 2, 3], 3, [3]),
        ([4, 4, 4, 4], 2, [4, 4, 4]),
        ([7, 2, 4], 2, [7, 4]),
    ],
)
def test_sliding_window_max(nums, k, expected):
    assert sliding_window_max(nums, k) == expected


@pytest.mark.parametrize("k", [0, -2])
def test_bad_k(k):
    with pytest.raises(ValueError):
        sliding_window_max([4, 2], k)


def test_random_against_brute_force():
    rng = random.Random(7)
    nums = [rng.randint(-50, 50) for _ in range(300)]
    for k in (1, 2, 5, 17, 300):
        assert sliding_window_max(nums, k) == [max(nums[i : i + k]) for i in range(len(nums) - k + 1)]


def test_large_input():
    rng = random.Random(11)
    nums = [rng.randint(0, 10**6) for _ in range(200_000)]
    out = sliding_window_max(nums, 5_000)
    assert len(out) == 195_001
    assert out[0] == max(nums[:5_000]) and out[-1] == max(nums[-5_000:])
