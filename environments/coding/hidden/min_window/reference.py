from collections import Counter


def min_window(text: str, chars: str) -> str:
    if not chars:
        return ""
    need = Counter(chars)
    missing = len(chars)
    best_start, best_len = 0, len(text) + 1
    left = 0
    for right, c in enumerate(text):
        if need[c] > 0:
            missing -= 1
        need[c] -= 1
        if missing == 0:
            while need[text[left]] < 0:
                need[text[left]] += 1
                left += 1
            if right - left + 1 < best_len:
                best_start, best_len = left, right - left + 1
            need[text[left]] += 1
            missing += 1
            left += 1
    return text[best_start : best_start + best_len] if best_len <= len(text) else ""
