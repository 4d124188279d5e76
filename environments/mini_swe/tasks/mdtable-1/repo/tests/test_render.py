import pytest

from mdtable import cell_text, render


def test_simple_table():
    assert render(["name", "qty"], [["apple", 3], ["kiwi", 12]]) == (
        "| name  | qty |\n"
        "| ----- | --- |\n"
        "| apple | 3   |\n"
        "| kiwi  | 12  |"
    )


def test_alignment():
    text = render(["name", "qty", "note"], [["apple", 3, "ok"]], align=["left", "right", "center"])
    assert text == (
        "| name  | qty | note |\n"
        "| :---- | --: | :--: |\n"
        "| apple |   3 |  ok  |"
    )


def test_min_width():
    assert render(["a"], [["b"]]) == "| a   |\n| --- |\n| b   |"


def test_short_rows_are_padded():
    assert render(["a", "b"], [["x"]]).splitlines()[-1] == "| x   |     |"


def test_long_rows_are_rejected():
    with pytest.raises(ValueError, match="row 0"):
        render(["a"], [["x", "y"]])


def test_bad_align():
    with pytest.raises(ValueError):
        render(["a"], [], align=["middle"])
    with pytest.raises(ValueError):
        render(["a", "b"], [], align=["left"])


def test_no_rows():
    assert render(["only"], []) == "| only |\n| ---- |"


def test_all_lines_have_the_same_length():
    text = render(["x", "longer header"], [["a much longer cell", None], [1.5, 2]])
    assert len({len(line) for line in text.splitlines()}) == 1


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, ""), (1.0, "1"), (0.25, "0.25"), (3, "3"), ("a\nb", "a<br>b"), ("a\r\nb", "a<br>b")],
)
def test_cell_text(value, text):
    assert cell_text(value) == text
