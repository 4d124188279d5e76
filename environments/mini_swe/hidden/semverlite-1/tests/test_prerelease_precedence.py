from semverlite import Version, max_satisfying, satisfies

SPEC_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
]


def test_semver_spec_example_order():
    shuffled = SPEC_ORDER[3:] + SPEC_ORDER[:3]
    assert sorted(shuffled, key=Version.parse) == SPEC_ORDER


def test_prerelease_below_release():
    assert Version.parse("1.0.0-rc.1") < Version.parse("1.0.0")
    assert Version.parse("1.0.0") > Version.parse("1.0.0-beta")
    assert Version.parse("1.0.0") != Version.parse("1.0.0-rc.1")


def test_max_satisfying_prefers_release():
    assert max_satisfying(["2.0.0-rc.1", "2.0.0"], ">=1.0.0") == "2.0.0"


def test_range_with_prerelease():
    assert satisfies("2.0.0-rc.1", "<2.0.0")
    assert not satisfies("2.0.0-rc.1", ">=2.0.0")
