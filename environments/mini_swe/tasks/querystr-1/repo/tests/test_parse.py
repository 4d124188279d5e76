from querystr import build_query, parse_query


def test_parse():
    assert parse_query("tag=a&tag=b&q=x") == {"tag": ["a", "b"], "q": ["x"]}


def test_parse_leading_question_mark_and_empty_pairs():
    assert parse_query("?a=1&&b=") == {"a": ["1"], "b": [""]}


def test_parse_decodes():
    assert parse_query("q=caf%C3%A9+au%20lait") == {"q": ["café au lait"]}


def test_round_trip():
    params = {"q": "a b&c", "tag": ["x", "y"]}
    assert parse_query(build_query(params)) == {"q": ["a b&c"], "tag": ["x", "y"]}
