def pascal_row(n: int) -> list[int]:
    if n < 0:
        raise ValueError("n must be non-negative")
    row = [1]
    for k in range(n):
        row.append(row[-1] * (n - k) // (k + 1))
    return row
