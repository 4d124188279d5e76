import pytest
from solution import rle_decode, rle_encode


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ("aaabccdddd", [("a", 3), ("b", 1), ("c", 2), ("d", 4)]),
        ("abc", [("a", 1), ("b", 1), ("c", 1)]),
        ("aaAA", [("a", 2), ("A", 2)]),
        ("z", [("z", 1)]),
        ("", []),
        ("  x", [(" ", 2), ("x", 1)]),
    ],
)
def test_encode(text, pairs):
    assert [tuple(p) for p in rle_encode(text)] == pairs


def test_decode():
    assert rle_decode([("x", 2), ("y", 1)]) == "xxy"
    assert rle_decode([]) == ""
    assert rle_decode([("x", 0), ("y", 3)]) == "yyy"


@pytest.mark.parametrize("text", ["mississippi", "aaaaaaaaaaab", "abababab", ""])
def test_round_trip(text):
    assert rle_decode(rle_encode(text)) == text
