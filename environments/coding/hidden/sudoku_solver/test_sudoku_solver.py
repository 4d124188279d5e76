import copy

import pytest
from solution import solve_sudoku


def _grid(text):
    digits = [int(c) for c in text if c.isdigit()]
    return [digits[r * 9 : r * 9 + 9] for r in range(9)]


EASY = _grid("003020600900305001001806400008102900700000008006708200002609500800203009005010300")
HARD = _grid("000000010400000000020000000000050407008000300001090000300400200050100000000806000")
SPARSE = _grid("100000000" + "0" * 72)


def _check_solution(puzzle, solution):
    assert isinstance(solution, list) and len(solution) == 9 and all(len(row) == 9 for row in solution)
    digits = set(range(1, 10))
    for i in range(9):
        assert set(solution[i]) == digits
        assert {solution[r][i] for r in range(9)} == digits
        br, bc = 3 * (i // 3), 3 * (i % 3)
        assert {solution[br + r][bc + c] for r in range(3) for c in range(3)} == digits
    for r in range(9):
        for c in range(9):
            if puzzle[r][c]:
                assert solution[r][c] == puzzle[r][c]


@pytest.mark.parametrize("puzzle", [EASY, HARD, SPARSE], ids=["easy", "hard17", "sparse"])
def test_solves(puzzle):
    before = copy.deepcopy(puzzle)
    solution = solve_sudoku(puzzle)
    assert puzzle == before
    _check_solution(puzzle, solution)


def test_already_solved_grid():
    solved = solve_sudoku(EASY)
    assert solve_sudoku(copy.deepcopy(solved)) == solved


def test_givens_breaking_a_rule():
    puzzle = copy.deepcopy(EASY)
    puzzle[0][0] = 3  # 3 is already in row 0
    assert solve_sudoku(puzzle) is None


def test_consistent_but_unsolvable():
    puzzle = [[0] * 9 for _ in range(9)]
    puzzle[0][:8] = [1, 2, 3, 4, 5, 6, 7, 8]
    puzzle[5][8] = 9  # the only digit left for (0, 8) is already in its column
    assert solve_sudoku(puzzle) is None


@pytest.mark.parametrize(
    "grid",
    [[[0] * 9 for _ in range(8)], [[0] * 8 for _ in range(9)], [[0] * 9 for _ in range(8)] + [[0] * 8 + [10]]],
    ids=["eight-rows", "eight-columns", "value-10"],
)
def test_bad_grid(grid):
    with pytest.raises(ValueError):
        solve_sudoku(grid)


def test_negative_value():
    grid = [[0] * 9 for _ in range(9)]
    grid[4][4] = -1
    with pytest.raises(ValueError):
        solve_sudoku(grid)
