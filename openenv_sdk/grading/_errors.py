"""Errors of remote grading, two trees.

    Exception
    └── RemoteError            the solution raised an exception that has no builtin equivalent here
                               (also the base of the local stand-ins of the solution's own exception
                               classes, e.g. `CycleError(ValueError, RemoteError)`)

    BaseException
    └── ChannelError           the call got no answer from the solution
        ├── RemoteTimeout      no answer within the per-call timeout       } the worker is killed; the
        ├── WorkerDied         the worker exited (os._exit, a crash, a limit) } next call starts a
        ├── ProtocolError      the answer broke the wire format or its bounds } fresh one
        ├── NotSendable        a value cannot cross the boundary (a local argument, or the result)
        ├── StaleHandle        a remote object of a worker that is gone
        └── SolutionImportError  the solution's module failed to import in the worker

`ChannelError` derives from `BaseException` on purpose: a failed channel is never an answer of the
solution, so a test's `pytest.raises(Exception)` or `except Exception` must not take a hang or a
crash for the error it expects. pytest reports it as the test's failure.
"""

from __future__ import annotations

__all__ = [
    "ChannelError",
    "NotSendable",
    "ProtocolError",
    "RemoteError",
    "RemoteTimeout",
    "SolutionImportError",
    "StaleHandle",
    "WorkerDied",
]


class RemoteError(Exception):
    """An exception raised by the solution in the worker.

    Attributes:
        type_name: the qualified name of the solution's exception class (e.g. `solution.ParseError`).
        message: `str()` of the exception, in the worker.
        remote_traceback: the worker's traceback (bounded), for debugging.
    """

    type_name: str = ""
    message: str = ""
    remote_traceback: str = ""

    def __str__(self) -> str:
        if "message" not in self.__dict__:
            return super().__str__()
        if type(self) is RemoteError:
            return f"{self.type_name}: {self.message}"
        return self.message


class ChannelError(BaseException):
    """The call could not be made or got no answer from the solution."""


class RemoteTimeout(ChannelError):
    """The worker did not answer within the per-call timeout."""


class WorkerDied(ChannelError):
    """The worker exited or closed its channel before answering."""


class ProtocolError(ChannelError):
    """The worker's answer broke the wire format or its bounds (never executed, only refused)."""


class NotSendable(ChannelError):
    """A value cannot cross the process boundary: an argument of a type the codec does not carry,
    or a result of the solution beyond the codec's bounds."""


class StaleHandle(ChannelError):
    """A remote object of a worker that has since been replaced (after a timeout or a crash)."""


class SolutionImportError(ChannelError):
    """The solution's module failed to import in the worker (a syntax error, an exception, `sys.exit`);
    the import's own exception is the `__cause__`."""
