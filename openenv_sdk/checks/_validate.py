"""Run the checks against a folder, a URL or an image, and collect a `ValidationReport`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import ProviderError
from ..providers.local import LocalProcessProvider, free_port
from ._result import CheckResult, ValidationReport
from ._runtime import DEFAULT_REQUEST_TIMEOUT_S, RuntimeProbe, run_runtime_checks
from ._static import EnvFolder, run_static_checks

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "free_port", "validate_image", "validate_path", "validate_url"]

DEFAULT_STARTUP_TIMEOUT_S = 30.0
"""How long `validate_path` waits for the folder's server to answer `/health`, in seconds."""

OnResult = Callable[[CheckResult], None]


def _collect(report: ValidationReport, results: Iterator[CheckResult], on_result: OnResult | None) -> None:
    for result in results:
        report.checks.append(result)
        if on_result is not None:
            on_result(result)


def validate_path(
    path: str | Path,
    *,
    runtime: bool = True,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    on_result: OnResult | None = None,
) -> ValidationReport:
    """Check an environment folder: statically, then (with `runtime`) by serving it locally.

    The runtime checks start `openenv serve PATH` on a free loopback port (the
    `LocalProcessProvider` that serves folders everywhere else, open: no orchestrator token),
    run the protocol checks against it, and always stop it. They are skipped when the folder
    cannot be served.

    Args:
        path: the environment folder.
        runtime: also serve the folder and run the protocol checks.
        startup_timeout_s: the longest wait for the server's `/health`, in seconds.
        timeout_s: the longest any one request may take, in seconds.
        on_result: called with each result as soon as it is known (for progress output).
    """
    report = ValidationReport(target=str(path), kind="path")
    with EnvFolder(path) as env:
        _collect(report, run_static_checks(env), on_result)
        manifest = env.manifest()
        ours = env.environment_class() is not None
        servable = ours or (manifest is not None and not manifest.environment and manifest.app is not None)
    if not runtime:
        return report
    if not servable:
        _collect(report, iter([CheckResult(name="server.start", passed=False, skipped=True,
                                           message="skipped: the folder cannot be served (see the failures above)")]),
                 on_result)
        return report
    provider = LocalProcessProvider(path, startup_timeout_s=startup_timeout_s, orchestrator_token=False,
                                    extra_args=("--workers", "1"))
    _run_against(report, lambda: _local(provider), strict_extensions=ours, timeout_s=timeout_s,
                 what="openenv serve", on_result=on_result,
                 fix=f"Run `openenv serve {path}` to see the server's own error")
    return report


@contextlib.contextmanager
def _local(provider: LocalProcessProvider) -> Iterator[str]:
    with provider:
        if provider.base_url is None:
            raise ProviderError(f"{provider!r} started without a URL")
        yield provider.base_url


def validate_url(
    url: str,
    *,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    strict_extensions: bool = False,
    on_result: OnResult | None = None,
) -> ValidationReport:
    """Run the protocol checks against a running server (this SDK's, or OpenEnv's).

    Args:
        url: the server's base URL, e.g. `http://127.0.0.1:8000`.
        timeout_s: the longest any one request may take, in seconds.
        strict_extensions: fail, rather than report, missing openenv-sdk extensions.
        on_result: called with each result as soon as it is known.

    Raises:
        ValueError: `url` is not an http(s) URL.
    """
    base = url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r} (e.g. http://127.0.0.1:8000)")
    report = ValidationReport(target=base, kind="url")
    with RuntimeProbe(base, timeout_s=timeout_s, strict_extensions=strict_extensions) as probe:
        _collect(report, run_runtime_checks(probe), on_result)
    return report


def validate_image(
    image: str,
    *,
    startup_timeout_s: float = 60.0,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    provider_options: dict[str, Any] | None = None,
    on_result: OnResult | None = None,
) -> ValidationReport:
    """Start an image in the container engine (`DockerProvider`), run the protocol checks, stop it.

    Args:
        image: the image tag, e.g. from `openenv build`.
        startup_timeout_s: the longest wait for the container's `/health`, in seconds.
        timeout_s: the longest any one request may take, in seconds.
        provider_options: more keyword arguments for `DockerProvider` (e.g. `network="bridge"`).
        on_result: called with each result as soon as it is known.
    """
    report = ValidationReport(target=image, kind="image")

    @contextlib.contextmanager
    def container() -> Iterator[str]:
        from ..containers.engine import connect_engine
        from ..providers.docker import DockerProvider

        options = dict(provider_options or {})
        engine = options.pop("engine", None) or connect_engine(docker_host=options.pop("docker_host", None))
        try:
            with DockerProvider(
                image, startup_timeout_s=startup_timeout_s, engine=engine, orchestrator_token=False, **options
            ) as provider:
                assert provider.base_url is not None
                yield provider.base_url
        finally:
            if "engine" not in (provider_options or {}):
                engine.close()  # ours: the engine client holds a socket

    _run_against(report, container, strict_extensions=False, timeout_s=timeout_s, what="the container",
                 on_result=on_result, fix=f"Build the image first (openenv build ENV_DIR), and check `docker logs` of {image}")
    return report


def _run_against(
    report: ValidationReport,
    start: Callable[[], contextlib.AbstractContextManager[str]],
    *,
    strict_extensions: bool,
    timeout_s: float,
    what: str,
    fix: str,
    on_result: OnResult | None,
) -> None:
    try:
        with start() as base_url:
            _collect(report, iter([CheckResult(name="server.start", passed=True, message=f"{what} is healthy at {base_url}")]),
                     on_result)
            with RuntimeProbe(base_url, timeout_s=timeout_s, strict_extensions=strict_extensions) as probe:
                _collect(report, run_runtime_checks(probe), on_result)
    except ProviderError as e:
        if any(check.name == "server.start" for check in report.checks):
            raise
        first, _, rest = str(e).partition("\n")
        message = first + (f"\n{rest}" if rest else "")
        _collect(report, iter([CheckResult(name="server.start", passed=False, message=message, fix=fix)]), on_result)
