"""The server's typed protocol error and its mapping to HTTP status codes."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..tools import validation_message
from ..types import ErrorCode

__all__ = ["HTTP_STATUS", "RequestRefused"]

HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.SESSION_BUSY: 409,
    ErrorCode.UNKNOWN_TYPE: 400,
    ErrorCode.SESSION_REQUIRED: 400,
    ErrorCode.SESSION_NOT_FOUND: 404,
    ErrorCode.UNKNOWN_CALL: 404,
    ErrorCode.NOT_RESET: 409,
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.VALIDATION_ERROR: 422,
    ErrorCode.EXECUTION_ERROR: 500,
    ErrorCode.FACTORY_ERROR: 500,
    ErrorCode.SESSION_ERROR: 500,
    ErrorCode.CAPACITY_REACHED: 503,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.CHECKPOINT_NOT_FOUND: 404,
    ErrorCode.CHECKPOINT_LIMIT: 507,
    ErrorCode.SNAPSHOT_UNSUPPORTED: 409,
}


class RequestRefused(Exception):
    """A request the server refuses, with its wire code. The session and the server go on."""

    def __init__(self, code: ErrorCode, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}

    @classmethod
    def from_validation(cls, e: ValidationError, context: str) -> RequestRefused:
        errors = [
            {"loc": list(err["loc"]), "msg": err["msg"], "type": err["type"]} for err in e.errors(include_url=False)
        ]
        return cls(ErrorCode.VALIDATION_ERROR, f"{context}: {validation_message(e)}", details={"errors": errors})

    def payload(self) -> dict[str, Any]:
        """The `data` of a WebSocket error reply, and the `detail` of an HTTP error body."""
        return {"message": self.message, "code": self.code.value, **self.details}

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]
