import copy
import random

import pytest
from solution import merge_intervals


@pytest.mark.parametrize(
    ("intervals", "merged"),
    [
        ([(1, 3), (2, 6), (8, 10), (15, 18)], [(1, 6), (8, 10), (15, 18)]),
        ([(1, 4), (4, 5)], [(1, 5)]),
        ([], []),
        ([(5, 5)], [(5, 5)]),
        ([(6, 8), (1, 9), (2, 4), (4, 7)], [(1, 9)]),
        ([(1, 2), (3, 4)], [(1, 2), (3, 4)]),
        ([[1, 3], [2, 4]], [(1, 4)]),
        ([(-5, -1), (-2, 3)], [(-5, 3)]),
        ([(1, 10), (2, 3)], [(1, 10)]),
        ([(1, 2), (1, 2)], [(1, 2)]),
        ([(4, 4), (4, 4), (5, 6)], [(4, 4), (5, 6)]),
        ([(3, 5), (0, 1), (5, 5), (1, 2)], [(0, 2), (3, 5)]),
    ],
)
def test_merge(intervals, merged):
    assert [tuple(i) for i in merge_intervals(intervals)] == merged


def test_returns_tuples():
    assert all(type(i) is tuple for i in merge_intervals([[1, 2], [5, 6]]))


@pytest.mark.parametrize("intervals", [[(3, 1)], [(1, 2), (5, 4)]])
def test_invalid_interval(intervals):
    with pytest.raises(ValueError):
        merge_intervals(intervals)


def test_input_is_not_modified():
    data = [[5, 6], [1, 3], [2, 4]]
    before = copy.deepcopy(data)
    merge_intervals(data)
    assert data == before


def test_random_against_point_sets():
    rng = random.Random(3)
    for _ in range(200):
        intervals = []
        for _ in range(rng.randint(1, 8)):
            a = rng.randint(0, 30)
            intervals.append((a, a + rng.randint(0, 5)))
        merged = [tuple(i) for i in merge_intervals(intervals)]
        covered = {x for a, b in intervals for x in range(a, b + 1)}
        # touching counts as overlapping, so check with half-points
        halves = {h for a, b in intervals for h in range(2 * a, 2 * b + 1)}
        assert {h for a, b in merged for h in range(2 * a, 2 * b + 1)} == halves
        assert {x for a, b in merged for x in range(a, b + 1)} == covered
        assert all(merged[i][1] < merged[i + 1][0] for i in range(len(merged) - 1))
