import random
import statistics

import pytest
from solution import MedianFinder


def test_example():
    m = MedianFinder()
    m.add(1)
    assert m.median() == 1.0
    m.add(3)
    assert m.median() == 2.0
    m.add(2)
    assert m.median() == 2.0 and len(m) == 3


def test_median_is_float():
    m = MedianFinder()
    m.add(4)
    assert isinstance(m.median(), float)


def test_empty():
    m = MedianFinder()
    assert len(m) == 0
    with pytest.raises(ValueError):
        m.median()


def test_duplicates_and_negatives():
    m = MedianFinder()
    for x in [5, 5, -1, -1, 5]:
        m.add(x)
    assert m.median() == 5.0
    m.add(-10)
    assert m.median() == 2.0


def test_random_against_statistics():
    rng = random.Random(21)
    m = MedianFinder()
    seen = []
    for _ in range(500):
        x = rng.uniform(-100, 100)
        m.add(x)
        seen.append(x)
        assert m.median() == pytest.approx(statistics.median(seen))


def test_large_stream():
    rng = random.Random(4)
    m = MedianFinder()
    values = [rng.randint(0, 10**9) for _ in range(5_000)]
    for x in values:
        m.add(x)
        m.median()
    assert len(m) == 5_000
    assert m.median() == pytest.approx(statistics.median(values))
