import pytest

from slugkit import slugify


@pytest.mark.parametrize(
    ("text", "slug"),
    [("Hello, World!", "hello-world"), ("Why?", "why"), ("a -- b --", "a-b"), ("...and more...", "and-more")],
)
def test_no_trailing_separator(text, slug):
    assert slugify(text) == slug


def test_custom_separator_at_the_end():
    assert slugify("Done.", separator="_") == "done"
