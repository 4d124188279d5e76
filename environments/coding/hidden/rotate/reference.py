def rotate(items: list, k: int) -> list:
    if not items:
        return []
    k %= len(items)
    return list(items[-k:] + items[:-k]) if k else list(items)
