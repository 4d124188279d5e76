from sniffcsv import read_rows, sniff


def test_semicolon_file_with_quoted_commas():
    sample = '"Smith, John";"Main St, 5"\n"Doe, Jane";"Elm St, 7"\n'
    assert sniff(sample).delimiter == ";"
    assert read_rows(sample) == [["Smith, John", "Main St, 5"], ["Doe, Jane", "Elm St, 7"]]


def test_comma_file_where_some_fields_have_quoted_commas():
    sample = 'name,city\n"Doe, Jane",Paris\nBob,Rome\n'
    dialect = sniff(sample)
    assert dialect.delimiter == ","
    assert read_rows(sample, dialect) == [["name", "city"], ["Doe, Jane", "Paris"], ["Bob", "Rome"]]


def test_tab_file_with_quoted_semicolons():
    sample = '"id"\t"note; remark"\n1\t"a;b"\n2\t"c;d"\n'
    dialect = sniff(sample)
    assert dialect.delimiter == "\t"
    assert dialect.has_header is True


def test_quoted_delimiter_does_not_win_a_tie():
    sample = '"name";"city, country"\n"Ada";"London, UK"\n"Grace";"NYC, US"\n'
    assert sniff(sample).delimiter == ";"
    assert read_rows(sample)[1] == ["Ada", "London, UK"]
