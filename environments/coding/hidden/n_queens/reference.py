def _check(n: int) -> None:
    if n < 1:
        raise ValueError("n must be at least 1")


def count_solutions(n: int) -> int:
    _check(n)
    full = (1 << n) - 1

    def place(cols: int, left: int, right: int) -> int:
        if cols == full:
            return 1
        total = 0
        free = full & ~(cols | left | right)
        while free:
            bit = free & -free
            free ^= bit
            total += place(cols | bit, ((left | bit) << 1) & full, (right | bit) >> 1)
        return total

    return place(0, 0, 0)


def first_solution(n: int) -> list[int] | None:
    _check(n)
    cols: list[int] = []
    used, diag1, diag2 = set(), set(), set()

    def place(r: int) -> bool:
        if r == n:
            return True
        for c in range(n):
            if c in used or r + c in diag1 or r - c in diag2:
                continue
            cols.append(c)
            used.add(c)
            diag1.add(r + c)
            diag2.add(r - c)
            if place(r + 1):
                return True
            cols.pop()
            used.discard(c)
            diag1.discard(r + c)
            diag2.discard(r - c)
        return False

    return cols if place(0) else None
