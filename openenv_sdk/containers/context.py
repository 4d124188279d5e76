"""Assemble the build context for a generated Dockerfile.

Layout (paths as `dockerfile.py` expects them):

    Dockerfile
    wheels/deps/   dependency wheels + requirements.txt
    wheels/sdk/    the SDK's wheel
    env/           the environment folder, without caches and virtualenvs
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from openenv_sdk.containers.dockerfile import CONTEXT_DEPS_DIR, CONTEXT_ENV_DIR, CONTEXT_SDK_DIR

__all__ = ["ENV_COPY_IGNORE", "assemble_context"]

ENV_COPY_IGNORE = (
    "__pycache__",
    "*.pyc",
    ".git",
    ".venv",
    "venv",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "*.egg-info",
    "build",
    "dist",
    ".DS_Store",
)


def assemble_context(
    context_dir: Path,
    *,
    env_dir: Path,
    dockerfile: str,
    sdk_wheel: Path,
    deps_dir: Path,
    hidden: Sequence[str] = (),
) -> None:
    """Fill the empty folder `context_dir` with the Dockerfile, the wheels and the environment.

    `hidden` paths (relative to `env_dir`, e.g. the manifest's `hidden: [hidden]`) never enter
    the context, so hidden tests and reference solutions never enter the image.
    """
    (context_dir / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    _link_tree(deps_dir, context_dir / CONTEXT_DEPS_DIR)
    _link_tree(sdk_wheel.parent, context_dir / CONTEXT_SDK_DIR, only=sdk_wheel.name)
    patterns = shutil.ignore_patterns(*ENV_COPY_IGNORE)
    excluded = {(env_dir / path).resolve() for path in hidden}

    def ignore(folder: str, names: list[str]) -> set[str]:
        return set(patterns(folder, names)) | {n for n in names if (Path(folder) / n).resolve() in excluded}

    shutil.copytree(env_dir, context_dir / CONTEXT_ENV_DIR, ignore=ignore)


def _link_tree(source: Path, dest: Path, *, only: str | None = None) -> None:
    # Hard links when on the same file system (no copy of tens of MB per build), else copies.
    dest.mkdir(parents=True, exist_ok=True)
    for file in sorted(source.iterdir()):
        if not file.is_file() or (only is not None and file.name != only):
            continue
        try:
            os.link(file, dest / file.name)
        except OSError:
            shutil.copy2(file, dest / file.name)
