from sniffcsv import Dialect, read_rows
from sniffcsv.sniffer import split_row


def test_read_rows_sniffs():
    assert read_rows("id;name\n1;Ada\n\n2;Grace\n") == [["id", "name"], ["1", "Ada"], ["2", "Grace"]]


def test_read_rows_with_dialect():
    assert read_rows("a|b\n", Dialect("|")) == [["a", "b"]]


def test_split_row_quotes():
    assert split_row('"a,b",c', ",") == ["a,b", "c"]
    assert split_row('"say ""hi""",x', ",") == ['say "hi"', "x"]
    assert split_row("'a;b';c", ";", "'") == ["a;b", "c"]


def test_split_row_empty_fields():
    assert split_row(",,", ",") == ["", "", ""]
