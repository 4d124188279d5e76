import random

import pytest
from solution import knapsack


def _check(items, capacity, expected_value):
    value, chosen = knapsack(items, capacity)
    assert value == expected_value
    assert list(chosen) == sorted(set(chosen))
    assert all(0 <= i < len(items) for i in chosen)
    assert sum(items[i][0] for i in chosen) <= capacity
    assert sum(items[i][1] for i in chosen) == value


def test_example():
    assert tuple(knapsack([(1, 1), (3, 4), (4, 5), (5, 7)], 7)) == (9, [1, 2])


@pytest.mark.parametrize(
    ("items", "capacity", "best"),
    [
        ([(10, 60), (20, 100), (30, 120)], 50, 220),
        ([], 10, 0),
        ([(5, 10)], 4, 0),
        ([(0, 5), (1, 1)], 0, 5),
        ([(2, 3), (2, 3), (2, 3)], 4, 6),
        ([(3, 0), (1, 0)], 5, 0),
        ([(4, 5), (4, 5), (8, 9)], 8, 10),
    ],
)
def test_small(items, capacity, best):
    _check(items, capacity, best)


def test_negative_capacity():
    with pytest.raises(ValueError):
        knapsack([(1, 1)], -1)


def test_against_brute_force():
    rng = random.Random(8)
    for _ in range(30):
        items = [(rng.randint(0, 12), rng.randint(0, 20)) for _ in range(rng.randint(1, 10))]
        capacity = rng.randint(0, 40)
        best = 0
        for mask in range(1 << len(items)):
            weight = sum(items[i][0] for i in range(len(items)) if mask >> i & 1)
            if weight <= capacity:
                best = max(best, sum(items[i][1] for i in range(len(items)) if mask >> i & 1))
        _check(items, capacity, best)


def test_large():
    rng = random.Random(13)
    items = [(rng.randint(1, 100), rng.randint(1, 100)) for _ in range(100)]
    value, chosen = knapsack(items, 1000)
    assert sum(items[i][0] for i in chosen) <= 1000
    assert sum(items[i][1] for i in chosen) == value
    # greedy by ratio is a lower bound; the optimum is at least as good
    greedy, room = 0, 1000
    for w, v in sorted(items, key=lambda it: -it[1] / it[0]):
        if w <= room:
            greedy, room = greedy + v, room - w
    assert value >= greedy
