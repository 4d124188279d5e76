from iniparse import dumps, parse


def test_equals_signs_in_value():
    assert parse("[auth]\ntoken = YWJjZA==\n").get("auth") == {"token": "YWJjZA=="}


def test_url_with_port_and_query():
    cfg = parse("[db]\nurl = postgres://db:5432/app?sslmode=require\n")
    assert cfg.get("db") == {"url": "postgres://db:5432/app?sslmode=require"}


def test_colon_delimiter_with_colons_in_value():
    assert parse("[cron]\nstart: 12:30\n").get("cron", "start") == "12:30"


def test_round_trip_with_delimiters_in_values():
    original = {"x": {"url": "http://h:80/?a=b&c=d", "expr": "a = b : c"}}
    assert parse(dumps(original)) == original
