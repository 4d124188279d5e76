import pytest
from solution import from_roman, to_roman


@pytest.mark.parametrize(
    ("n", "numeral"),
    [
        (1, "I"),
        (4, "IV"),
        (9, "IX"),
        (14, "XIV"),
        (40, "XL"),
        (90, "XC"),
        (400, "CD"),
        (1994, "MCMXCIV"),
        (2024, "MMXXIV"),
        (3999, "MMMCMXCIX"),
    ],
)
def test_both_ways(n, numeral):
    assert to_roman(n) == numeral
    assert from_roman(numeral) == n


@pytest.mark.parametrize("n", [0, -1, 4000])
def test_to_roman_out_of_range(n):
    with pytest.raises(ValueError):
        to_roman(n)


@pytest.mark.parametrize("s", ["", "IIII", "IC", "VV", "mcm", "ABC", "MMMM", "IXI", "XM"])
def test_from_roman_rejects_non_canonical(s):
    with pytest.raises(ValueError):
        from_roman(s)


def test_round_trip_everything():
    for n in range(1, 4000):
        assert from_roman(to_roman(n)) == n
