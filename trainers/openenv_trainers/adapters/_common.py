"""What every trainer adapter needs: the grader from a reference, and a prompt from an observation."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

from openenv_sdk.rubric import Rubric

from ..sources import EnvSource

__all__ = ["import_grader", "make_source", "observation_text", "resolve_grader"]


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


def import_grader(ref: str) -> Rubric | Any:
    """The grader an import reference names (`package.module:Name`); a class is instantiated.

    Raises:
        ValueError: the reference is not `module:attribute`, or names nothing there.
    """
    module_name, sep, attribute = ref.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"grader {ref!r} must be `package.module:Name`")
    try:
        grader = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"grader {ref!r} cannot be imported: {e}") from e
    return grader() if isinstance(grader, type) else grader


def resolve_grader(source: EnvSource, grader: Rubric | Any | str | None) -> Rubric | Any:
    """The host-side grader: the one given (an object, or an import reference), else the one the
    source's folder names in its `openenv.yaml`.

    Raises:
        ValueError: no grader given and the source is not a folder naming one.
    """
    if isinstance(grader, str):
        return import_grader(grader)
    if grader is not None:
        return grader
    return source.grader()


def observation_text(observation: Mapping[str, Any]) -> str:
    """What a reset observation tells the agent: its `prompt` or `message` text, else its JSON."""
    for key in ("prompt", "message", "text"):
        value = observation.get(key)
        if isinstance(value, str) and value:
            return value
    shown = {k: v for k, v in observation.items() if k not in ("done", "reward", "metadata")}
    return json.dumps(shown, ensure_ascii=False)
