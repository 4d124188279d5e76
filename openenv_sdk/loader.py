"""Loading an environment folder: its manifest, its environment class (or OpenEnv app), its grader.

The one loader of a folder: `openenv serve`, `openenv validate` (`checks.EnvFolder`), `openenv
eval` and the trainers import what a manifest names through `import_ref` here.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .environment import Environment
from .errors import ManifestError
from .manifest import Manifest, load_manifest

__all__ = ["LoadedEnvironment", "import_ref", "load_environment", "load_grader"]


@dataclass(frozen=True)
class LoadedEnvironment:
    """An environment folder, ready to serve."""

    path: Path
    manifest: Manifest
    env_cls: type[Environment[Any, Any, Any]] | None
    """The class named by `environment:`; None for an OpenEnv folder that names only `app:`."""
    app: Any | None
    """The ASGI app named by `app:` when there is no `environment:` (an OpenEnv environment)."""
    readme: str | None


def import_ref(folder: Path, ref: str, *, what: str) -> Any:
    """Import `module:attribute` from an environment folder.

    A top-level module file of the folder (`grader.py`, `wordle_env.py`) is loaded under a name
    unique to the folder (`openenv_env_<folder>_<hash>.grader`), so two environments' `grader`
    modules can live in one process (a trainer over several environments). The folder is also
    put on `sys.path`, so environment modules can import their siblings.
    """
    folder = Path(folder).resolve()
    module_name, _, attribute = ref.partition(":")
    for entry in (str(folder), str(folder.parent)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        module = _import_from_folder(folder, module_name)
    except Exception as e:
        raise ManifestError(f"{folder / 'openenv.yaml'}: {what} {ref!r}: cannot import {module_name!r}: {e}") from e
    try:
        return getattr(module, attribute)
    except AttributeError as e:
        raise ManifestError(
            f"{folder / 'openenv.yaml'}: {what} {ref!r}: module {module_name!r} has no {attribute!r}"
        ) from e


def _import_from_folder(folder: Path, module_name: str) -> Any:
    file = folder / f"{module_name}.py"
    if "." in module_name or not file.is_file():
        return importlib.import_module(module_name)  # a package, or an installed module
    digest = hashlib.sha1(str(folder).encode()).hexdigest()[:8]
    unique = f"openenv_env_{re.sub(r'[^0-9A-Za-z_]', '_', folder.name)}_{digest}.{module_name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def load_environment(path: str | Path) -> LoadedEnvironment:
    """Read `openenv.yaml` in `path` and import what it names.

    Raises:
        ManifestError: the manifest is invalid, names nothing to serve, or its import fails.
    """
    folder = Path(path).resolve()
    manifest = load_manifest(folder)
    readme_file = folder / "README.md"
    readme = readme_file.read_text(encoding="utf-8") if readme_file.is_file() else None
    if manifest.environment:
        env_cls = import_ref(folder, manifest.environment, what="environment")
        if not (isinstance(env_cls, type) and issubclass(env_cls, Environment)):
            raise ManifestError(
                f"{folder / 'openenv.yaml'}: environment {manifest.environment!r} is not an "
                f"openenv_sdk.Environment subclass (got {env_cls!r})"
            )
        return LoadedEnvironment(folder, manifest, env_cls, None, readme)
    if manifest.app:
        return LoadedEnvironment(folder, manifest, None, import_ref(folder, manifest.app, what="app"), readme)
    raise ManifestError(
        f"{folder / 'openenv.yaml'}: names nothing to serve: set `environment: module:Class` "
        f"(an openenv_sdk.Environment subclass) or OpenEnv's `app: module:app`"
    )


def load_grader(ref: str | Path) -> Any:
    """The host-side grader `ref` names: an environment folder (its `openenv.yaml`'s `grader:`) or
    `package.module:Name` (importable from the current directory or an installed package).

    The one grader loader: `openenv eval`, the Harbor verifier, `EnvSource.grader()` and every
    trainer adapter's `grader=` go through it. A class (a `Grader` subclass) is instantiated; a
    Rubric instance or a reward function is returned as it is (the SDK's `grade` takes each).

    Raises:
        ManifestError: (a `ValueError`) the folder's manifest is invalid or names no `grader:`, the
            reference is neither a folder nor `module:attribute`, or the import fails.
    """
    path = Path(ref)
    if path.is_dir():
        folder = path.resolve()
        manifest = load_manifest(folder)
        if not manifest.grader:
            raise ManifestError(
                f"{folder / 'openenv.yaml'} names no `grader:`: add one, or pass the grader (`package.module:Name`)"
            )
        grader = import_ref(folder, manifest.grader, what="grader")
    else:
        module_name, sep, attribute = str(ref).partition(":")
        if not sep or not module_name or not attribute:
            raise ManifestError(f"a grader is an environment folder or `package.module:Name`, got {str(ref)!r}")
        # `openenv eval --grader my_grader:Grader` names a module in the directory it is run from.
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            grader = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as e:
            raise ManifestError(f"the grader {str(ref)!r} cannot be imported: {type(e).__name__}: {e}") from e
    return grader() if isinstance(grader, type) else grader
