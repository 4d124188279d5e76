import pytest
from solution import group_anagrams


@pytest.mark.parametrize(
    ("words", "groups"),
    [
        (["eat", "tea", "tan", "ate", "nat", "bat"], [["eat", "tea", "ate"], ["tan", "nat"], ["bat"]]),
        ([], []),
        ([""], [[""]]),
        (["a", "a"], [["a", "a"]]),
        (["ab", "BA"], [["ab"], ["BA"]]),
        (["abc", "", "cab", "", "bca"], [["abc", "cab", "bca"], ["", ""]]),
        (["aab", "aba", "abb"], [["aab", "aba"], ["abb"]]),
    ],
)
def test_group_anagrams(words, groups):
    assert group_anagrams(words) == groups
