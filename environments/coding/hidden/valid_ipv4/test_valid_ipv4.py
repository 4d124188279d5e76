import pytest
from solution import is_valid_ipv4


@pytest.mark.parametrize("text", ["192.168.0.1", "0.0.0.0", "255.255.255.255", "10.0.0.10", "1.2.3.4"])
def test_valid(text):
    assert is_valid_ipv4(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "256.1.1.1",
        "1.1.1",
        "1.1.1.1.1",
        "01.1.1.1",
        "1.1.1.-1",
        " 1.1.1.1",
        "1.1.1.1 ",
        "1..1.1",
        "a.b.c.d",
        "",
        "1.1.1.1.",
        "+1.1.1.1",
        "\u0661.1.1.1",
        "1.1.1.00",
        "1000.1.1.1",
        "1,1,1,1",
    ],
)
def test_invalid(text):
    assert is_valid_ipv4(text) is False
