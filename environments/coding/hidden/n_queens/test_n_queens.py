import pytest
from solution import count_solutions, first_solution


@pytest.mark.parametrize(("n", "count"), [(1, 1), (2, 0), (3, 0), (4, 2), (5, 10), (6, 4), (7, 40), (8, 92), (10, 724)])
def test_count(n, count):
    assert count_solutions(n) == count


@pytest.mark.parametrize(
    ("n", "placement"), [(1, [0]), (2, None), (3, None), (4, [1, 3, 0, 2]), (8, [0, 4, 7, 5, 2, 6, 1, 3])]
)
def test_first_solution(n, placement):
    assert first_solution(n) == placement


def test_first_solution_is_valid_for_larger_boards():
    for n in (9, 12):
        cols = first_solution(n)
        assert sorted(cols) == list(range(n))
        assert len({r + c for r, c in enumerate(cols)}) == n
        assert len({r - c for r, c in enumerate(cols)}) == n


@pytest.mark.parametrize("n", [0, -1])
def test_bad_n(n):
    with pytest.raises(ValueError):
        count_solutions(n)
    with pytest.raises(ValueError):
        first_solution(n)
