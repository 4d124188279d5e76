import pytest
from solution import chunk


def test_uneven():
    assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_even():
    assert chunk([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_exact_and_larger_size():
    assert chunk([1, 2, 3], 3) == [[1, 2, 3]]
    assert chunk([1], 5) == [[1]]


def test_empty():
    assert chunk([], 3) == []


def test_size_one():
    assert chunk(["a", "b"], 1) == [["a"], ["b"]]


@pytest.mark.parametrize("size", [0, -1])
def test_bad_size(size):
    with pytest.raises(ValueError):
        chunk([1, 2], size)
