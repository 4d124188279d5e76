def reverse_words(s: str) -> str:
    return " ".join(reversed(s.split()))
