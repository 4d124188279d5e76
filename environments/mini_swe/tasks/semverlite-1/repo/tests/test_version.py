import pytest

from semverlite import Version


def test_parse():
    v = Version.parse("v1.2.3-rc.1+build.5")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert v.prerelease == ("rc", "1")
    assert v.build == ("build", "5")
    assert v.is_prerelease


@pytest.mark.parametrize("text", ["1.2", "1.2.3.4", "01.2.3", "1.2.3-", "1.2.3-01", "latest", ""])
def test_parse_rejects(text):
    with pytest.raises(ValueError):
        Version.parse(text)


@pytest.mark.parametrize("text", ["1.2.3", "0.0.1-alpha.1", "2.0.0+exp.sha.5114f85", "1.0.0-x-y.7+b"])
def test_str_round_trip(text):
    assert str(Version.parse(text)) == text


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.2.3", "1.2.4"),
        ("1.2.9", "1.3.0"),
        ("1.9.9", "2.0.0"),
        ("1.0.0-alpha", "1.0.0-beta"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.2", "1.0.0-alpha.10"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-rc.1", "1.0.1-alpha"),
    ],
)
def test_ordering(lower, higher):
    assert Version.parse(lower) < Version.parse(higher)
    assert Version.parse(higher) > Version.parse(lower)


def test_build_metadata_ignored():
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")
    assert len({Version.parse("1.0.0+a"), Version.parse("1.0.0")}) == 1


def test_bump():
    v = Version.parse("1.2.3-rc.1")
    assert str(v.bump("major")) == "2.0.0"
    assert str(v.bump("minor")) == "1.3.0"
    assert str(v.bump("patch")) == "1.2.4"
    with pytest.raises(ValueError):
        v.bump("build")
