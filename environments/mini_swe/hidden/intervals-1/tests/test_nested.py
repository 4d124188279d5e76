from intervals import contains, gaps, merge, total_length


def test_nested_interval():
    assert merge([(1, 10), (2, 3)]) == [(1, 10)]
    assert total_length([(1, 10), (2, 3)]) == 9


def test_long_interval_covering_several():
    assert merge([(3, 4), (0, 10), (5, 6)]) == [(0, 10)]
    assert gaps([(3, 4), (0, 10), (5, 6), (12, 13)]) == [(10, 12)]


def test_contains_start_of_long_interval():
    assert contains([(1, 10), (2, 3)], 1.5)
