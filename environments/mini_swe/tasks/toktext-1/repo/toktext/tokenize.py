"""Splitting text into tokens and sentences."""

from __future__ import annotations

import re
from collections.abc import Sequence

# A word (with inner apostrophes or hyphens: don't, well-known), a number, or one punctuation mark.
_TOKEN = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*|\d+(?:[.,]\d+)*|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def tokenize(text: str, *, lower: bool = False) -> list[str]:
    """Words, numbers and punctuation marks, in order."""
    tokens = _TOKEN.findall(text)
    return [t.lower() for t in tokens] if lower else tokens


def words(text: str, *, lower: bool = False) -> list[str]:
    """The tokens that are words or numbers (no punctuation)."""
    return [t for t in tokenize(text, lower=lower) if t[0].isalnum()]


def sentences(text: str) -> list[str]:
    """Split text after `.`, `!` or `?` followed by whitespace; each sentence is stripped."""
    return [part.strip() for part in _SENTENCE_END.split(text)]


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """Consecutive n-token windows: `ngrams(["a", "b", "c"], 2)` is `[("a", "b"), ("b", "c")]`."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
