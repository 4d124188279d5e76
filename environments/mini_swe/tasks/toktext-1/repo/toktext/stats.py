"""Simple statistics over text."""

from __future__ import annotations

from .tokenize import sentences, words


def word_count(text: str) -> int:
    return len(words(text))


def sentence_count(text: str) -> int:
    return len(sentences(text))


def average_sentence_length(text: str) -> float:
    """Mean number of words per sentence; 0.0 for text without sentences."""
    count = sentence_count(text)
    if count == 0:
        return 0.0
    return word_count(text) / count
