"""toktext: a tiny English tokenizer."""

from .stats import average_sentence_length, sentence_count, word_count
from .tokenize import ngrams, sentences, tokenize, words

__all__ = ["average_sentence_length", "ngrams", "sentence_count", "sentences", "tokenize", "word_count", "words"]
