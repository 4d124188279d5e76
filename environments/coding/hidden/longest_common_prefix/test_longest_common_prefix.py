import pytest
from solution import longest_common_prefix


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["flower", "flow", "flight"], "fl"),
        (["dog", "racecar", "car"], ""),
        ([], ""),
        (["alone"], "alone"),
        (["", "a"], ""),
        (["same", "same"], "same"),
        (["ab", "a"], "a"),
        (["interspecies", "interstellar", "interstate"], "inters"),
        (["Abc", "abc"], ""),
    ],
)
def test_longest_common_prefix(words, expected):
    assert longest_common_prefix(words) == expected
