def solve_sudoku(grid: list[list[int]]) -> list[list[int]] | None:
    if len(grid) != 9 or any(len(row) != 9 for row in grid):
        raise ValueError("the grid must be 9x9")
    if any(not isinstance(v, int) or not 0 <= v <= 9 for row in grid for v in row):
        raise ValueError("values must be integers 0-9")
    cells = [v for row in grid for v in row]
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    for i, v in enumerate(cells):
        if v:
            r, c = divmod(i, 9)
            b = (r // 3) * 3 + c // 3
            bit = 1 << v
            if rows[r] & bit or cols[c] & bit or boxes[b] & bit:
                return None
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
    empty = [i for i, v in enumerate(cells) if v == 0]
    full = 0b1111111110

    def search() -> bool:
        best, best_options, best_count = -1, 0, 10
        for i in empty:
            if cells[i]:
                continue
            r, c = divmod(i, 9)
            options = full & ~(rows[r] | cols[c] | boxes[(r // 3) * 3 + c // 3])
            count = bin(options).count("1")
            if count < best_count:
                best, best_options, best_count = i, options, count
                if count <= 1:
                    break
        if best == -1:
            return True
        if best_count == 0:
            return False
        r, c = divmod(best, 9)
        b = (r // 3) * 3 + c // 3
        for v in range(1, 10):
            bit = 1 << v
            if best_options & bit:
                cells[best] = v
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
                if search():
                    return True
                rows[r] &= ~bit
                cols[c] &= ~bit
                boxes[b] &= ~bit
                cells[best] = 0
        return False

    if not search():
        return None
    return [cells[r * 9 : r * 9 + 9] for r in range(9)]
