import pytest

from toktext import ngrams, sentences, tokenize, words


def test_tokenize_words_and_punctuation():
    assert tokenize("Hello, world!") == ["Hello", ",", "world", "!"]


def test_contractions_and_hyphens_stay_whole():
    assert tokenize("Don't use well-known tricks.") == ["Don't", "use", "well-known", "tricks", "."]


def test_numbers():
    assert tokenize("It costs 1,250.50 today") == ["It", "costs", "1,250.50", "today"]


def test_lower():
    assert tokenize("ABC Def", lower=True) == ["abc", "def"]


def test_words_drop_punctuation():
    assert words("Wait... what?!") == ["Wait", "what"]


def test_sentences():
    assert sentences("It works. Does it? Yes!") == ["It works.", "Does it?", "Yes!"]


def test_sentences_across_newlines():
    assert sentences("First line.\nSecond line.\n\nThird.") == ["First line.", "Second line.", "Third."]


def test_sentence_without_final_punctuation():
    assert sentences("no punctuation here") == ["no punctuation here"]


def test_ngrams():
    assert ngrams(["a", "b", "c"], 2) == [("a", "b"), ("b", "c")]
    assert ngrams(["a", "b"], 3) == []
    with pytest.raises(ValueError):
        ngrams(["a"], 0)
