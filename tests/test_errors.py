"""One error vocabulary: every wire code the server sends has its own class on the client."""

from __future__ import annotations

import pytest

from openenv_sdk.client._base import server_error
from openenv_sdk.errors import (
    AuthenticationError,
    ExecutionError,
    InvalidActionError,
    RequestError,
    ServerError,
    ServerTimeout,
    SessionError,
    error_class,
)
from openenv_sdk.server._protocol import HTTP_STATUS
from openenv_sdk.types import ErrorCode


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_has_a_specific_class_and_an_http_status(code: ErrorCode) -> None:
    assert error_class(code.value) is not ServerError, f"{code.value} falls through to the bare ServerError"
    assert code in HTTP_STATUS


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("INVALID_JSON", RequestError),
        ("UNKNOWN_CALL", InvalidActionError),
        ("FACTORY_ERROR", ExecutionError),
        ("TIMEOUT", ServerTimeout),
        ("NOT_RESET", SessionError),
        ("SESSION_BUSY", SessionError),
        ("UNAUTHORIZED", AuthenticationError),
    ],
)
def test_a_payload_becomes_its_class_with_code_and_details(code: str, cls: type[ServerError]) -> None:
    error = server_error({"message": "no", "code": code, "limit": 3})
    assert type(error) is cls and error.code == code and error.details == {"limit": 3}
    assert str(error) == f"[{code}] no"


def test_an_unknown_code_from_a_newer_server_stays_a_server_error() -> None:
    error = server_error({"message": "later", "code": "SOMETHING_NEW"})
    assert type(error) is ServerError and error.code == "SOMETHING_NEW"


def _drawn_tree() -> dict[str, str]:
    """Each class in the tree drawn in `openenv_sdk.errors`' docstring, with the class drawn above it
    (the nearest earlier name drawn further left)."""
    import re

    import openenv_sdk.errors as errors

    parents: dict[str, str] = {}
    drawn: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^[\s│├└─]*([A-Z][A-Za-z]+)(\s|$)", line)
        if not match or not line.startswith("    "):
            continue
        column, name = match.start(1), match.group(1)
        above = [n for c, n in drawn if c < column]
        if above:
            parents[name] = above[-1]
        drawn = [(c, n) for c, n in drawn if c < column] + [(column, name)]
    return parents


def test_the_drawn_tree_is_the_class_tree() -> None:
    """Every exported error is drawn in the docstring's tree under its own base class (the classes
    drawn from other modules are checked by tests/test_raised_errors.py)."""
    import openenv_sdk.errors as errors

    drawn = _drawn_tree()
    classes = {name: getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)}
    assert set(classes) - {"OpenEnvError"} <= set(drawn)
    for name, parent in drawn.items():
        if name in classes and parent in classes:
            assert classes[name].__bases__[0] is classes[parent], f"{name} is drawn under {parent}"
