import pytest

from toktext import average_sentence_length, sentence_count, sentences


@pytest.mark.parametrize("text", ["", "   ", "\n", " \n\t \n"])
def test_blank_text_has_no_sentences(text):
    assert sentences(text) == []
    assert sentence_count(text) == 0
    assert average_sentence_length(text) == 0.0


def test_trailing_whitespace_adds_no_sentence():
    assert sentences("Hello there. ") == ["Hello there."]
    assert sentences("One. Two!\n") == ["One.", "Two!"]


def test_average_ignores_trailing_newline():
    assert average_sentence_length("One two three. ") == 3.0
    assert average_sentence_length("One two. Three four five six.\n") == 3.0
