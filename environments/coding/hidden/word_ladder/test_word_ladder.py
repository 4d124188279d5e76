import random
import string

import pytest
from solution import ladder_length


@pytest.mark.parametrize(
    ("begin", "end", "words", "expected"),
    [
        ("hit", "cog", ["hot", "dot", "dog", "lot", "log", "cog"], 5),
        ("hit", "cog", ["hot", "dot", "dog", "lot", "log"], 0),
        ("a", "c", ["a", "b", "c"], 2),
        ("same", "same", [], 1),
        ("cat", "cot", ["cot"], 2),
        ("cat", "dog", ["cot", "cog", "dog", "dogs", "ca"], 4),
        ("abc", "xyz", ["xbc", "xyc", "xyz", "abz"], 4),
        ("ab", "cd", ["ad", "cd", "ab"], 3),
        ("lead", "gold", ["load", "goad", "gold", "lewd"], 4),
    ],
)
def test_ladder_length(begin, end, words, expected):
    assert ladder_length(begin, end, words) == expected


def test_large_word_list():
    rng = random.Random(1)
    words = {"".join(rng.choice(string.ascii_lowercase[:8]) for _ in range(5)) for _ in range(5000)}
    chain = ["aaaaa", "baaaa", "bbaaa", "bbbaa", "bbbba", "bbbbb", "cbbbb", "ccbbb"]
    words.update(chain)
    words.add("qqqqq")  # in the list, but no other word has a q: unreachable
    n = ladder_length("aaaaa", "ccbbb", sorted(words))
    assert 2 <= n <= len(chain)
    assert ladder_length("aaaaa", "qqqqq", sorted(words)) == 0
    assert ladder_length("aaaaa", "zzzzz", sorted(words)) == 0
