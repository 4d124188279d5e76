"""`check_env`: the rules of `openenv validate`, run in-process on an environment class.

Modelled on Gymnasium's `gymnasium.utils.env_checker.check_env`: it raises when a rule fails
and warns for advice. The rules are the same functions `openenv validate` runs
(`CLASS_CHECKS` from `_static.py`, `RUNTIME_CHECKS` from `_runtime.py`); only the target
differs: a class given directly instead of a folder.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

from ..errors import ProviderError
from ..types import ORCHESTRATOR_TOKEN_VAR
from ._result import CheckResult, ValidationReport
from ._runtime import DEFAULT_REQUEST_TIMEOUT_S
from ._static import EnvClass, run_class_checks
from ._validate import _collect, _run_against

__all__ = ["EnvCheckWarning", "check_env"]

DEFAULT_CHECK_STARTUP_TIMEOUT_S = 10.0


class EnvCheckWarning(UserWarning):
    """A rule that is advice, not a requirement (e.g. a tool without a description), is broken."""


def check_env(
    env_cls: Any,
    *,
    skip_runtime: bool = False,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    startup_timeout_s: float = DEFAULT_CHECK_STARTUP_TIMEOUT_S,
) -> ValidationReport:
    """Check an environment class against the rules `openenv validate` checks, in this process.

    The class rules run first (it subclasses `Environment`, its models have JSON Schemas, it can
    step, its tools have object schemas and descriptions, no reserved tool names, `tasks()`).
    Then, unless `skip_runtime`, the class is served with `create_app` on a free loopback port
    in a thread of this process and the protocol rules run against it over real HTTP and
    WebSocket connections (reset, step, state, typed errors, close, MCP), with this SDK's
    extensions required.

    Example:
        >>> from openenv_sdk import check_env
        >>> report = check_env(MyEnvironment)  # doctest: +SKIP
        >>> report.summary  # doctest: +SKIP
        {'pass': 21, 'fail': 0, 'warn': 0, 'skip': 0, 'unsupported': 0}

    Args:
        env_cls: the environment class (an `openenv_sdk.Environment` subclass; pass the class,
            not an instance).
        skip_runtime: run only the class rules; serve nothing.
        timeout_s: the longest any one request of the protocol rules may take, in seconds.
        startup_timeout_s: the longest wait for the in-process server to start, in seconds.

    Returns:
        The report of every rule (`report.checks`), when no rule failed.

    Warns:
        EnvCheckWarning: once for each advisory rule the class breaks.

    Raises:
        EnvCheckError: a rule failed; the message names every failed rule with its fix, and
            `error.report` holds the whole report.
        ValueError: `timeout_s` or `startup_timeout_s` is not positive.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    if not startup_timeout_s > 0:
        raise ValueError(f"startup_timeout_s must be positive, got {startup_timeout_s}")
    target = EnvClass(env_cls)
    label = f"{env_cls.__module__}.{env_cls.__qualname__}" if isinstance(env_cls, type) else repr(env_cls)
    report = ValidationReport(target=label, kind="class")
    _collect(report, run_class_checks(target), None)
    cls = target.environment_class()
    if not skip_runtime:
        if cls is None or not report.passed:
            _collect(report, iter([CheckResult(name="server.start", passed=False, skipped=True,
                                               message="skipped: the class cannot be served (see the failures above)")]),
                     None)
        else:
            _run_against(report, lambda: _serve(cls, startup_timeout_s), strict_extensions=True, timeout_s=timeout_s,
                         what="create_app", on_result=None,
                         fix="Serve the class with create_app and openenv_sdk.testing.serve_app to see the error")
    for result in report.checks:
        if result.status == "warn":
            warnings.warn(result.line(), EnvCheckWarning, stacklevel=2)
    report.raise_for_failures()
    return report


@contextlib.contextmanager
def _serve(cls: Any, startup_timeout_s: float) -> Iterator[str]:
    """Serve `cls` in a thread with `create_app`; a server that cannot start is a `ProviderError`."""
    from ..server import create_app
    from ..testing import serve_app

    # create_app takes the orchestrator token from the environment (and removes it): the probe
    # sends none, so the check serves open and leaves this process's environment as it was.
    saved = os.environ.pop(ORCHESTRATOR_TOKEN_VAR, None)
    try:
        try:
            app = create_app(cls)
        except Exception as e:
            raise ProviderError(f"create_app({cls.__name__}) raised {type(e).__name__}: {e}") from e
    finally:
        if saved is not None:
            os.environ[ORCHESTRATOR_TOKEN_VAR] = saved
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(serve_app(app, timeout_s=startup_timeout_s))
        except RuntimeError as e:
            raise ProviderError(f"the server of {cls.__name__} did not start: {e}") from e
        yield url
