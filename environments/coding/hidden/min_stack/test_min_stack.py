import pytest
from solution import MinStack


def test_example():
    s = MinStack()
    s.push(3)
    s.push(1)
    s.push(2)
    assert s.get_min() == 1
    assert s.top() == 2
    assert s.pop() == 2
    assert s.pop() == 1
    assert s.get_min() == 3
    assert len(s) == 1


def test_duplicate_minimums():
    s = MinStack()
    for x in [2, 1, 1, 3]:
        s.push(x)
    assert s.get_min() == 1
    s.pop()
    s.pop()
    assert s.get_min() == 1
    s.pop()
    assert s.get_min() == 2


def test_empty_stack_raises():
    s = MinStack()
    assert len(s) == 0
    for op in (s.pop, s.top, s.get_min):
        with pytest.raises(IndexError):
            op()


def test_emptied_stack_raises_again():
    s = MinStack()
    s.push(5)
    s.pop()
    with pytest.raises(IndexError):
        s.get_min()


def test_negative_and_float_values():
    s = MinStack()
    for x in [0, -2.5, 7, -10]:
        s.push(x)
    assert s.get_min() == -10
    s.pop()
    assert s.get_min() == -2.5


def test_many_operations_are_fast():
    s = MinStack()
    for i in range(5_000):
        s.push(5_000 - i)
        assert s.get_min() == 5_000 - i
    for i in range(4_999):
        s.pop()
        assert s.get_min() == i + 2
