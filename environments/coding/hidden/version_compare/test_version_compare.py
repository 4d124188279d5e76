import pytest
from solution import compare_versions


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1.2.10", "1.2.9", 1),
        ("1.0", "1", 0),
        ("1.0.0.1", "1", 1),
        ("0.1", "1.0", -1),
        ("1.01", "1.1", 0),
        ("2", "10", -1),
        ("3.4.5", "3.4.5", 0),
        ("1.0.0", "1.0.0.0.0", 0),
        ("0", "0.0.1", -1),
    ],
)
def test_compare(a, b, expected):
    assert compare_versions(a, b) == expected


@pytest.mark.parametrize(("a", "b"), [("", "1"), ("1..2", "1"), ("1.a", "1"), ("1", "1."), ("1.-1", "1"), ("1", " 1")])
def test_invalid(a, b):
    with pytest.raises(ValueError):
        compare_versions(a, b)
