"""The one "Did you mean" helper: the closest name, with a prefix, or nothing."""

from openenv_sdk._suggest import did_you_mean


def test_closest_name_is_suggested() -> None:
    assert did_you_mean("fix_fibonaci", ["fix_fibonacci", "git_revert"]) == " Did you mean 'fix_fibonacci'?"


def test_nothing_close_gives_empty_hint() -> None:
    assert did_you_mean("zzzz", ["fix_fibonacci", "git_revert"]) == ""


def test_prefix_goes_before_the_suggestion() -> None:
    assert did_you_mean("memroy", ["memory", "cpus"], prefix="resources.") == " Did you mean 'resources.memory'?"


def test_non_string_names_and_options() -> None:
    assert did_you_mean(12, [123, 999]) == " Did you mean '123'?"
