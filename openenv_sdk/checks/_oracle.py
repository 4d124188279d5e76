"""The reference solution a manifest names (`oracle: oracle.py:act`), and the do-nothing policy.

An oracle is a scripted policy, the same function `openenv eval --policy scripted:MODULE:FUNCTION`
loads: `act(messages, tools, context)` returns the next assistant message (tool calls, or a final
answer). It runs host-side, beside the grader, so it may read the folder's hidden data (a
reference solution, the answer list). `openenv validate --deep` plays it on every sampled task
(it must score the top reward); training collects its episodes as worked examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ManifestError
from ..evaluation._policy import ScriptedPolicy, load_policy
from ..manifest import MANIFEST_FILENAME, Manifest, load_manifest

__all__ = ["DO_NOTHING", "do_nothing_policy", "load_oracle", "oracle_file"]

DO_NOTHING = "do-nothing"


def oracle_file(folder: str | Path, ref: str) -> tuple[Path, str]:
    """The file and function an `oracle:` reference names, inside `folder`.

    `oracle.py:act` and `sub/oracle.py:act` name a file; `oracle:act` and `pkg.oracle:act` a module
    of the folder (`oracle.py`, `pkg/oracle.py` or `pkg/oracle/__init__.py`).

    Raises:
        ManifestError: no such file in the folder, or the reference leaves the folder.
    """
    root = Path(folder).resolve()
    module, _, function = ref.rpartition(":")
    if module.endswith(".py"):
        candidates = [root / module]
    else:
        base = root.joinpath(*module.split("."))
        candidates = [base.with_suffix(".py"), base / "__init__.py"]
    for candidate in candidates:
        path = candidate.resolve()
        if not path.is_relative_to(root):
            raise ManifestError(f"{root / MANIFEST_FILENAME}: oracle {ref!r} points outside the folder")
        if path.is_file():
            return path, function
    raise ManifestError(
        f"{root / MANIFEST_FILENAME}: oracle {ref!r}: no file {candidates[0].relative_to(root)} in the folder"
    )


def load_oracle(folder: str | Path, manifest: Manifest | None = None) -> ScriptedPolicy | None:
    """The folder's oracle as a `ScriptedPolicy` (named `oracle:<ref>`), or None when the manifest names none.

    Loaded with `openenv_sdk.evaluation.load_policy`, the loader of `--policy scripted:...`.

    Raises:
        ManifestError: the file is missing, or it does not import or lacks the function.
    """
    manifest = manifest or load_manifest(folder)
    if manifest.oracle is None:
        return None
    path, function = oracle_file(folder, manifest.oracle)
    try:
        policy = load_policy(f"scripted:{path}:{function}")
    except ValueError as e:
        raise ManifestError(f"{Path(folder) / MANIFEST_FILENAME}: oracle {manifest.oracle!r}: {e}") from e
    policy.name = f"oracle:{manifest.oracle}"
    return policy


def _stop(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    return "I am done."


def do_nothing_policy() -> ScriptedPolicy:
    """A policy that answers at once, calling no tool: an untouched task must score the floor."""
    return ScriptedPolicy(_stop, name=DO_NOTHING)
