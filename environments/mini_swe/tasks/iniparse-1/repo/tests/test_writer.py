from iniparse import dumps, parse


def test_dumps_layout():
    text = dumps({"a": {"x": "1", "y": "two"}, "b": {"z": "3"}})
    assert text == "[a]\nx = 1\ny = two\n\n[b]\nz = 3\n"


def test_round_trip():
    original = {"server": {"host": "example.org", "port": "8080"}, "paths": {"data": "/var/lib/demo"}}
    assert parse(dumps(original)) == original


def test_round_trip_multiline():
    original = {"paths": {"include": "/a.conf\n/b.conf"}}
    assert parse(dumps(original)) == original


def test_empty_config():
    assert dumps({}) == ""
