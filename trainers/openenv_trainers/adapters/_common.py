"""What every trainer adapter needs: its environment source and the grader (the prompt from an
observation is `openenv_sdk.prompt.observation_text`, the same as `openenv eval`'s)."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping
from typing import Any

from openenv_sdk.loader import load_grader
from openenv_sdk.rubric import Rubric

from ..sources import EnvSource

__all__ = ["close_shared_sources", "make_source", "resolve_grader", "shared_source"]


def make_source(
    *,
    env_dir: str | None = None,
    base_url: str | None = None,
    image: str | None = None,
    startup_timeout_s: float = 120.0,
    client_timeout_s: float = 60.0,
) -> EnvSource:
    """An `EnvSource` from exactly one of a folder, a URL or an image.

    Raises:
        ValueError: none or several were given.
    """
    return EnvSource(
        base_url,
        env_dir=env_dir,
        image=image,
        startup_timeout_s=startup_timeout_s,
        client_timeout_s=client_timeout_s,
    )


def resolve_grader(source: EnvSource, grader: Rubric | Any | str | None) -> Rubric | Any:
    """The host-side grader: the one given (an object, or a reference `openenv_sdk.loader.load_grader`
    takes: `package.module:Name` or a folder), else the one the source's folder names in its `openenv.yaml`.

    Raises:
        ValueError: no grader given and the source is not a folder naming one, or the reference
            cannot be loaded (`ManifestError`, a `ValueError`).
    """
    if isinstance(grader, str):
        return load_grader(grader)
    if grader is not None:
        return grader
    return source.grader()


_SHARED: dict[tuple[str | None, str | None, str | None], tuple[EnvSource, dict[str | None, Any]]] = {}
"""Per environment: its source and its graders by reference."""
_SHARED_LOCK = threading.Lock()


def shared_source(config: Mapping[str, Any]) -> tuple[EnvSource, Rubric | Any]:
    """The process's one source for the environment a config names (`env_dir` | `base_url` |
    `image`), and the grader it names (`grader`, default the folder's), for trainers that build
    an environment object per trajectory (SkyRL, verl): a folder or an image is served once.

    Raises:
        ValueError: not exactly one of `env_dir`, `base_url`, `image`; or no grader found.
    """
    key = (config.get("env_dir"), config.get("base_url"), config.get("image"))
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            source = make_source(
                env_dir=key[0],
                base_url=key[1],
                image=key[2],
                startup_timeout_s=float(config.get("startup_timeout_s", 120.0)),
                client_timeout_s=float(config.get("client_timeout_s", 60.0)),
            )
            entry = _SHARED[key] = (source, {})
        source, graders = entry
        ref = config.get("grader")
        if ref not in graders:
            graders[ref] = resolve_grader(source, ref)
        return source, graders[ref]


def close_shared_sources() -> None:
    """Stop every server `shared_source` started (also registered to run at exit)."""
    with _SHARED_LOCK:
        sources = [source for source, _ in _SHARED.values()]
        _SHARED.clear()
    for source in sources:
        source.close()


atexit.register(close_shared_sources)
