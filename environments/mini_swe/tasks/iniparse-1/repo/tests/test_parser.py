import pytest

from iniparse import ParseError, parse

SAMPLE = """
# global settings
name = demo

[server]
host = example.org
Port: 8080
debug = yes ; temporary

[paths]
; where things live
data = /var/lib/demo
include =
    /etc/demo/a.conf
    /etc/demo/b.conf
"""


def test_sections_and_default():
    cfg = parse(SAMPLE)
    assert set(cfg) == {"DEFAULT", "server", "paths"}
    assert cfg.get("DEFAULT", "name") == "demo"
    assert cfg.get("server", "host") == "example.org"


def test_keys_are_case_insensitive():
    cfg = parse(SAMPLE)
    assert cfg.get("server", "port") == "8080"
    assert cfg.get("server", "PORT") == "8080"


def test_typed_getters():
    cfg = parse(SAMPLE)
    assert cfg.getint("server", "port") == 8080
    assert cfg.getbool("server", "debug") is True
    assert cfg.getint("server", "missing", 3) == 3


def test_inline_comments_are_stripped():
    assert parse("[a]\nx = 1 ; one\ny = 2 # two\n").get("a") == {"x": "1", "y": "2"}


def test_continuation_lines():
    cfg = parse(SAMPLE)
    assert cfg.get("paths", "include") == "\n/etc/demo/a.conf\n/etc/demo/b.conf"


def test_empty_value():
    assert parse("[a]\nkey =\n").get("a", "key") == ""


@pytest.mark.parametrize(
    ("text", "lineno"),
    [("[broken\nx = 1", 1), ("[a]\njust words", 2), ("[]\n", 1), ("[a]\n= value", 2)],
)
def test_errors_name_the_line(text, lineno):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.lineno == lineno
