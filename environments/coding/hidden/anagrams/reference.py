from collections import Counter


def are_anagrams(a: str, b: str) -> bool:
    def key(s: str) -> Counter:
        return Counter(c for c in s.lower() if not c.isspace())

    return key(a) == key(b)
