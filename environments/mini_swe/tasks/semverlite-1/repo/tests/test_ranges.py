import pytest

from semverlite import max_satisfying, satisfies


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("1.4.2", ">=1.2.0", True),
        ("1.4.2", ">=1.2.0, <1.4.0", False),
        ("1.4.2", "^1.2.0", True),
        ("2.0.0", "^1.2.0", False),
        ("0.2.5", "^0.2.1", True),
        ("0.3.0", "^0.2.1", False),
        ("1.2.9", "~1.2.3", True),
        ("1.3.0", "~1.2.3", False),
        ("1.2.3", "1.2.3", True),
        ("1.2.3", "=1.2.4", False),
    ],
)
def test_satisfies(version, spec, expected):
    assert satisfies(version, spec) is expected


def test_bad_range():
    with pytest.raises(ValueError):
        satisfies("1.0.0", ">=1.0.0,,")


def test_max_satisfying():
    versions = ["1.2.0", "1.9.1", "2.0.0", "0.9.0"]
    assert max_satisfying(versions, ">=1.0.0, <2.0.0") == "1.9.1"
    assert max_satisfying(versions, "^3.0.0") is None


def test_max_satisfying_keeps_spelling():
    assert max_satisfying(["v1.0.0", "v1.1.0"], ">=1.0.0") == "v1.1.0"
