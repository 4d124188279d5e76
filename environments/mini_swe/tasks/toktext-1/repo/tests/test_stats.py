from toktext import average_sentence_length, sentence_count, word_count


def test_word_count():
    assert word_count("One, two, three.") == 3


def test_sentence_count():
    assert sentence_count("One. Two! Three?") == 3


def test_average_sentence_length():
    assert average_sentence_length("One two. Three four five six.") == 3.0
