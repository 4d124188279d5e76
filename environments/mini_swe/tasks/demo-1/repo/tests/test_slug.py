import pytest

from slugkit import slugify


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Hello World", "hello-world"),
        ("  Leading spaces", "leading-spaces"),
        ("Crème brûlée recipes", "creme-brulee-recipes"),
        ("Python 3.12 is out", "python-3-12-is-out"),
        ("already-a-slug", "already-a-slug"),
    ],
)
def test_slugify(text, slug):
    assert slugify(text) == slug


def test_separator():
    assert slugify("Hello World", separator="_") == "hello_world"


def test_max_length_never_ends_with_separator():
    assert slugify("Hello wonderful world", max_length=6) == "hello"


def test_empty():
    assert slugify("") == ""
