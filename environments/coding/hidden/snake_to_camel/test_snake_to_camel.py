import pytest
from solution import snake_to_camel


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("hello_world", "helloWorld"),
        ("HTTP_response_code", "httpResponseCode"),
        ("__private__var", "privateVar"),
        ("single", "single"),
        ("Single", "single"),
        ("", ""),
        ("___", ""),
        ("a_b_c", "aBC"),
        ("version_2_update", "version2Update"),
        ("trailing_", "trailing"),
    ],
)
def test_snake_to_camel(name, expected):
    assert snake_to_camel(name) == expected
