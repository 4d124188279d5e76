from solution import dedupe


def test_keeps_first_occurrence_order():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_empty():
    assert dedupe([]) == []


def test_case_sensitive_strings():
    assert dedupe(["a", "A", "a"]) == ["a", "A"]


def test_equal_numbers_are_duplicates():
    result = dedupe([1, 1.0, True, 2])
    assert result == [1, 2] and type(result[0]) is int


def test_no_duplicates():
    assert dedupe(["x", "y", "z"]) == ["x", "y", "z"]


def test_input_is_not_modified():
    data = [1, 1, 2]
    dedupe(data)
    assert data == [1, 1, 2]
