def knapsack(items: list[tuple[int, int]], capacity: int) -> tuple[int, list[int]]:
    if capacity < 0:
        raise ValueError("capacity must be non-negative")
    n = len(items)
    best = [[0] * (capacity + 1) for _ in range(n + 1)]
    for i, (weight, value) in enumerate(items, 1):
        previous, current = best[i - 1], best[i]
        for c in range(capacity + 1):
            current[c] = previous[c]
            if weight <= c and previous[c - weight] + value > current[c]:
                current[c] = previous[c - weight] + value
    chosen = []
    c = capacity
    for i in range(n, 0, -1):
        if best[i][c] != best[i - 1][c]:
            chosen.append(i - 1)
            c -= items[i - 1][0]
    return best[n][capacity], sorted(chosen)
