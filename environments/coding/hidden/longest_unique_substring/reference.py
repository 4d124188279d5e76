def longest_unique_substring(text: str) -> str:
    last: dict[str, int] = {}
    start = best_start = best_len = 0
    for i, c in enumerate(text):
        if last.get(c, -1) >= start:
            start = last[c] + 1
        last[c] = i
        if i - start + 1 > best_len:
            best_start, best_len = start, i - start + 1
    return text[best_start : best_start + best_len]
