import pytest
from solution import number_to_words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (5, "five"),
        (13, "thirteen"),
        (20, "twenty"),
        (42, "forty-two"),
        (100, "one hundred"),
        (105, "one hundred five"),
        (999, "nine hundred ninety-nine"),
        (1000, "one thousand"),
        (1001, "one thousand one"),
        (1234, "one thousand two hundred thirty-four"),
        (1_000_000, "one million"),
        (2_000_010, "two million ten"),
        (12_345_678, "twelve million three hundred forty-five thousand six hundred seventy-eight"),
        (999_999_999, "nine hundred ninety-nine million nine hundred ninety-nine thousand nine hundred ninety-nine"),
    ],
)
def test_number_to_words(n, words):
    assert number_to_words(n) == words


@pytest.mark.parametrize("n", [-1, 1_000_000_000])
def test_out_of_range(n):
    with pytest.raises(ValueError):
        number_to_words(n)
