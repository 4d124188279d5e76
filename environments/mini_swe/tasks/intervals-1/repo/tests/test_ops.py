import pytest

from intervals import contains, gaps, intersect, merge, total_length


def test_merge_sorted_overlapping():
    assert merge([(1, 3), (2, 4), (6, 8)]) == [(1, 4), (6, 8)]


def test_merge_unsorted_disjoint():
    assert merge([(5, 6), (1, 2), (3, 4)]) == [(1, 2), (3, 4), (5, 6)]


def test_merge_touching():
    assert merge([(1, 2), (2, 3)]) == [(1, 3)]


def test_merge_empty_and_single():
    assert merge([]) == []
    assert merge([(1, 1)]) == [(1, 1)]


def test_merge_accepts_lists():
    assert merge([[0, 1], [1, 5]]) == [(0, 5)]


def test_merge_rejects_backwards_interval():
    with pytest.raises(ValueError):
        merge([(3, 1)])


def test_total_length():
    assert total_length([(1, 3), (2, 4)]) == 3
    assert total_length([(0, 1), (5, 7)]) == 3
    assert total_length([]) == 0


def test_contains():
    assert contains([(1, 3), (5, 6)], 5.5)
    assert not contains([(1, 3), (5, 6)], 4)


def test_intersect():
    assert intersect([(0, 5)], [(3, 10)]) == [(3, 5)]
    assert intersect([(0, 2), (4, 6)], [(1, 5)]) == [(1, 2), (4, 5)]
    assert intersect([(0, 1)], [(2, 3)]) == []


def test_gaps():
    assert gaps([(0, 2), (5, 6), (8, 9)]) == [(2, 5), (6, 8)]
    assert gaps([(0, 2)]) == []
