import re
from collections import Counter


def word_counts(text: str) -> dict[str, int]:
    return dict(Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text)))
