import copy

from solution import flatten


def test_deeply_nested():
    assert flatten([1, [2, [3, [4]]], 5]) == [1, 2, 3, 4, 5]


def test_empty_lists_vanish():
    assert flatten([]) == []
    assert flatten([[], [[]], [[], []]]) == []


def test_only_lists_are_flattened():
    assert flatten([(1, 2), "ab", [3], {"k": [4]}]) == [(1, 2), "ab", 3, {"k": [4]}]


def test_already_flat():
    assert flatten([1, 2, 3]) == [1, 2, 3]


def test_input_is_not_modified():
    data = [1, [2, [3]], [[4]]]
    before = copy.deepcopy(data)
    flatten(data)
    assert data == before


def test_depth_two_hundred():
    data = [0]
    for i in range(1, 200):
        data = [data, i]
    assert flatten(data) == list(range(200))
