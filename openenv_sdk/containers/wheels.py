"""Prepare wheels on the host, so image builds install with `pip --no-index` (no network).

Two sets, each cached under the cache folder so a rebuild reuses byte-identical files (which
keeps the engine's layer cache valid):

* the SDK's wheel, built from the checkout this package runs from (keyed by a hash of its
  sources), or downloaded from the index when the SDK is installed from a wheel;
* the dependency wheels (the SDK's requirements plus the environment's), keyed by the
  requirement list and the host's Python and platform. They are built for the host's
  interpreter: the base image's Python must have the same minor version.

The cache folder is `$OPENENV_CACHE_DIR`, else `$XDG_CACHE_HOME/openenv`, else `~/.cache/openenv`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from openenv_sdk.containers.errors import BuildError

__all__ = [
    "DEFAULT_PIP_TIMEOUT_S",
    "PreparedWheels",
    "cache_dir",
    "dependency_wheels",
    "sdk_source_root",
    "sdk_wheel",
    "wheel_requirements",
]

DEFAULT_PIP_TIMEOUT_S = 900.0
_SDK_DIST = "openenv-sdk"
_SDK_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "README.md", "LICENSE", "MANIFEST.in")
_SDK_WHEELS_KEPT = 5
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


class PreparedWheels(BaseModel):
    """Where the prepared wheels are."""

    model_config = ConfigDict(frozen=True)

    sdk_wheel: Path
    deps_dir: Path
    requirements: list[str]


def cache_dir() -> Path:
    """The folder wheels are cached in (created on demand)."""
    root = os.environ.get("OPENENV_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "openenv"


def sdk_source_root() -> Path | None:
    """The checkout the SDK is imported from (a folder with `pyproject.toml`), or `None`."""
    package_dir = Path(__file__).resolve().parent.parent
    root = package_dir.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and _SDK_DIST in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def sdk_wheel(*, source_root: Path | None = None, timeout_s: float = DEFAULT_PIP_TIMEOUT_S) -> Path:
    """The SDK's wheel: built from `source_root` (default: this checkout), cached by content.

    Without a checkout (the SDK was installed from a wheel), the installed version is
    downloaded from the package index instead.

    Raises:
        BuildError: pip failed; the message carries the tail of its output.
    """
    root = source_root or sdk_source_root()
    if root is None:
        from importlib.metadata import version

        target = cache_dir() / "wheels" / "sdk" / f"dist-{version(_SDK_DIST)}"
        if not _wheels_in(target):
            with _filling(target) as partial:
                _pip(
                    ["download", "--no-deps", "--only-binary=:all:", f"{_SDK_DIST}=={version(_SDK_DIST)}", "-d"],
                    partial,
                    timeout_s=timeout_s,
                )
        return _wheels_in(target)[0]
    files = _sdk_files(root)
    target = cache_dir() / "wheels" / "sdk" / _digest(root, files)
    found = _wheels_in(target)
    if found:
        return found[0]
    # Build from a copy: an in-tree build leaves `build/` behind, whose stale files would be
    # packed into later wheels.
    with tempfile.TemporaryDirectory(prefix="openenv-sdk-src-") as tmp, _filling(target) as partial:
        for file in files:
            dest = Path(tmp) / file.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, dest)
        _pip(["wheel", "--no-deps", tmp, "-w"], partial, timeout_s=timeout_s)
    found = _wheels_in(target)
    if not found:
        raise BuildError(f"pip wheel made no wheel for {root}", tag="", log_tail=[])
    _prune(target.parent, keep=_SDK_WHEELS_KEPT)
    return found[0]


def wheel_requirements(wheel: Path) -> list[str]:
    """The unconditional requirements (`Requires-Dist` without an extra) of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode("utf-8"))
    return [req for req in metadata.get_all("Requires-Dist") or [] if "extra ==" not in req.replace('"', "'")]


def dependency_wheels(requirements: list[str], *, timeout_s: float = DEFAULT_PIP_TIMEOUT_S) -> Path:
    """A folder with wheels for `requirements` and all they need, and a `requirements.txt`.

    Raises:
        BuildError: pip could not resolve or build a requirement.
    """
    reqs = sorted(dict.fromkeys(r.strip() for r in requirements if r.strip()))
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}-{sys.platform}-{platform.machine()}"
    key = hashlib.sha256("\n".join([tag, *reqs]).encode()).hexdigest()[:16]
    target = cache_dir() / "wheels" / "deps" / f"{tag}-{key}"
    req_file = target / "requirements.txt"
    if req_file.is_file():
        return target
    with _filling(target) as partial:
        (partial / "requirements.in").write_text("".join(f"{r}\n" for r in reqs), encoding="utf-8")
        if reqs:
            _pip(["wheel", "-r", str(partial / "requirements.in"), "-w"], partial, timeout_s=timeout_s)
        # written last: its presence marks a complete folder
        (partial / "requirements.in").rename(partial / "requirements.txt")
    return target


@contextlib.contextmanager
def _filling(target: Path) -> Iterator[Path]:
    """A private folder to fill, moved to `target` when the block succeeds.

    Concurrent builds each fill their own folder; the first to finish wins, the others are
    dropped (their content is equivalent).
    """
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        yield partial
        if target.exists() and not any(target.iterdir()):
            target.rmdir()
        with contextlib.suppress(OSError):  # another build finished first
            partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _prune(folder: Path, *, keep: int) -> None:
    # Each edit of the SDK's sources makes a new wheel folder; keep the newest few.
    entries = sorted(
        (p for p in folder.iterdir() if p.is_dir() and ".partial-" not in p.name),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def _pip(args: list[str], dest: Path, *, timeout_s: float) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", *args, str(dest), "--disable-pip-version-check", "-q"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"`pip {args[0]}` ran over {timeout_s:.0f}s", tag="", log_tail=[]) from e
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-30:]
        raise BuildError(
            f"`pip {' '.join(args)} {dest}` failed (exit {proc.returncode}) while preparing wheels on the host:\n"
            + "\n".join(tail),
            tag="",
            log_tail=tail,
        )


def _sdk_files(root: Path) -> list[Path]:
    files = [root / name for name in _SDK_FILES if (root / name).is_file()]
    for path in sorted((root / "openenv_sdk").rglob("*")):
        if path.is_file() and not _SKIP_DIRS.intersection(path.relative_to(root).parts) and path.suffix != ".pyc":
            files.append(path)
    return files


def _digest(root: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _wheels_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.whl")) if folder.is_dir() else []
