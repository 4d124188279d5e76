import pytest

from sniffcsv import Dialect, SniffError, sniff


@pytest.mark.parametrize(
    ("sample", "delimiter"),
    [
        ("id,name,score\n1,Ada,90\n2,Grace,85\n", ","),
        ("id;name;score\n1;Ada;90\n2;Grace;85\n", ";"),
        ("id\tname\n1\tAda\n2\tGrace\n", "\t"),
        ("id|name\n1|Ada\n2|Grace\n", "|"),
    ],
)
def test_delimiters(sample, delimiter):
    assert sniff(sample).delimiter == delimiter


def test_consistency_beats_frequency():
    # commas appear more often, but only the semicolon splits every line the same way
    sample = "a;b\n1,2,3,4;x\n5;y,z\n"
    assert sniff(sample).delimiter == ";"


def test_header_detection():
    assert sniff("name,age\nAda,36\nGrace,45\n").has_header is True
    assert sniff("Ada,36\nGrace,45\n").has_header is False
    assert sniff("a,b\nc,d\n").has_header is False


def test_single_line_has_no_header():
    assert sniff("a,b,c").has_header is False


def test_quotechar():
    assert sniff("'a','b'\n'c','d'\n").quotechar == "'"
    assert sniff('"a","b"\n"c","d"\n').quotechar == '"'


def test_dialect_repr():
    assert repr(sniff("x;y\n1;2\n")) == "Dialect(delimiter=';', quotechar='\"', has_header=True)"
    assert Dialect(",") == Dialect(",", '"', False)


@pytest.mark.parametrize("sample", ["", "\n\n", "just one column\nanother\n"])
def test_no_dialect(sample):
    with pytest.raises(SniffError):
        sniff(sample)
