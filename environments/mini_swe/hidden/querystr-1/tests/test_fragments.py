from querystr import build_url


def test_query_goes_before_the_fragment():
    assert build_url("https://example.org/docs#install", {"utm_source": "mail"}) == (
        "https://example.org/docs?utm_source=mail#install"
    )


def test_existing_query_and_fragment():
    assert build_url("https://example.org/s?lang=en#top", {"q": "x"}) == "https://example.org/s?lang=en&q=x#top"


def test_question_mark_inside_the_fragment():
    assert build_url("https://example.org/app#/view?id=3", {"a": 1}) == "https://example.org/app?a=1#/view?id=3"


def test_empty_fragment_is_kept():
    assert build_url("/page#", page=2) == "/page?page=2#"
