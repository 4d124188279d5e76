import pytest
from solution import parse_csv_line


@pytest.mark.parametrize(
    ("line", "fields"),
    [
        ("a,b,c", ["a", "b", "c"]),
        ("", [""]),
        ("a,,c", ["a", "", "c"]),
        (",", ["", ""]),
        ("a,,", ["a", "", ""]),
        ('"a,b",c', ["a,b", "c"]),
        ('a,"b,c",d', ["a", "b,c", "d"]),
        ('"say ""hi""",x', ['say "hi"', "x"]),
        ('a"b,c', ['a"b', "c"]),
        (" a , b ", [" a ", " b "]),
        ('""', [""]),
        ('"",""', ["", ""]),
        ('x,""""', ["x", '"']),
    ],
)
def test_parse(line, fields):
    assert parse_csv_line(line) == fields


@pytest.mark.parametrize("line", ['"abc', '"a"b,c', 'x,"unterminated', '"a" ,b', '"a""'])
def test_invalid(line):
    with pytest.raises(ValueError):
        parse_csv_line(line)
