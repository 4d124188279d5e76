"""`openenv init NAME`: scaffold an environment folder that passes `openenv validate` at once.

Templates (`--template`), each a folder of `templates/`:

- `guess` (the default): guess a hidden number; the grader reads the final state (no agent code runs).
- `code`: the agent writes Python in a sandboxed workspace; hidden tests, sent by the host-side
  grader, run where the agent's code never runs (`openenv_sdk.grading.pytest_run`).
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from enum import Enum
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated

import typer

from .._suggest import did_you_mean
from ..errors import OpenEnvError
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, escape, fail, print_json

__all__ = ["ScaffoldError", "Template", "init", "scaffold", "validate_name"]

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SUFFIX = ".tmpl"


class Template(str, Enum):
    """What `openenv init` makes; each value names a folder of `templates/`."""

    guess = "guess"
    """Guess a hidden number with a tool; the grader reads the final state."""
    code = "code"
    """The agent writes Python in a sandbox; hidden tests grade it where its code never runs."""


class ScaffoldError(OpenEnvError, ValueError):
    """The name is not usable, or the target folder is not empty."""


def validate_name(name: str) -> str:
    """Check an environment name: lower snake_case, a valid module name once `_env` is added.

    Raises:
        ScaffoldError: the name is not usable; the message says which rule it breaks.
    """
    if not _NAME_RE.match(name):
        raise ScaffoldError(
            f"invalid name {name!r}: use lower snake_case starting with a letter (letters, digits, _), e.g. 'my_game'"
        )
    if keyword.iskeyword(name) or name.endswith("_") or "__" in name:
        raise ScaffoldError(f"invalid name {name!r}: not a keyword, no double or trailing underscores")
    module = module_name(name)
    if module in sys.stdlib_module_names or module in ("openenv_sdk", "openenv", "grader"):
        raise ScaffoldError(f"invalid name {name!r}: its module {module!r} would shadow an existing module")
    return name


def module_name(name: str) -> str:
    """The environment's module: `<name>_env` (or `name` when it already ends in `_env`)."""
    return name if name.endswith("_env") else f"{name}_env"


def _prefix(name: str) -> str:
    base = name.removesuffix("_env") or name
    return "".join(part.capitalize() for part in base.split("_"))


def _title(name: str) -> str:
    return " ".join(part.capitalize() for part in (name.removesuffix("_env") or name).split("_"))


def scaffold(name: str, parent: str | Path = ".", template: Template | str = Template.guess) -> list[Path]:
    """Write the environment folder `parent/name` from `template`; return the files written.

    Raises:
        ScaffoldError: the name or the template is unknown, or `parent/name` exists and is not an
            empty folder.
    """
    validate_name(name)
    template = _template(template)
    target = Path(parent) / name
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ScaffoldError(f"{target} already exists and is not an empty folder")
    values = {
        "__MODULE__": module_name(name),
        "__PREFIX__": _prefix(name),
        "__TITLE__": _title(name),
        "__NAME__": name,
    }
    written: list[Path] = []
    root = resources.files("openenv_sdk.cli") / "templates" / template.value
    for relative, source in _walk(root):
        dest = target / _fill(relative.removesuffix(_SUFFIX), values)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(_fill(source.read_text(encoding="utf-8"), values), encoding="utf-8")
        written.append(dest)
    return sorted(written)


def _template(template: Template | str) -> Template:
    try:
        return Template(template)
    except ValueError:
        names = [t.value for t in Template]
        hint = did_you_mean(template, names)
        raise ScaffoldError(f"unknown template {template!r}: the templates are {', '.join(names)}.{hint}") from None


def _walk(folder: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    found: list[tuple[str, Traversable]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        relative = f"{prefix}{entry.name}"
        if entry.is_dir():
            found += _walk(entry, relative + "/")
        elif entry.name.endswith(_SUFFIX):
            found.append((relative, entry))
    return found


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():  # __MODULE__ and __PREFIX__ before __NAME__ (no overlap, but explicit)
        text = text.replace(key, value)
    return text


def init(
    name: Annotated[str, typer.Argument(help="Environment name, lower snake_case (e.g. my_game).", show_default=False)],
    parent: Annotated[Path, typer.Option("--dir", help="Folder to create the environment in.")] = Path("."),
    template: Annotated[
        Template,
        typer.Option(
            "--template",
            help="What to make. guess: guess a hidden number with a tool, graded from the final state. "
            "code: the agent writes Python in a sandboxed workspace; hidden tests grade it in a trusted "
            "process its code never runs in (docs/grading.md).",
        ),
    ] = Template.guess,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Create an environment folder: manifest, class with tools, grader, README and tests.

    The folder passes `openenv validate` as it is, and its tests pass under pytest.

    Examples:
        openenv init my_game
        openenv init my_game --dir environments
        openenv init my_kata --template code
    """
    fmt = resolve_format(output_format, json_flag)
    try:
        files = scaffold(name, parent, template)
    except ScaffoldError as e:
        fail(str(e), hint="Example: openenv init my_game --dir environments", code=2)
        return
    target = Path(parent) / name
    if fmt is OutputFormat.json:
        print_json({"path": str(target), "template": template.value, "files": [str(f.relative_to(target)) for f in files]})
    elif fmt is OutputFormat.human:
        console.print(f"Created [bold]{escape(str(target))}[/] with:")
        for file in files:
            console.print(f"  {escape(str(file.relative_to(target)))}")
        # pytest is not in the base install (only in the dev extra): say so rather than suggest a missing command
        has_pytest = importlib.util.find_spec("pytest") is not None
        tests = f"python -m pytest {target / 'tests'}" + ("" if has_pytest else "  (first: pip install pytest)")
        console.print(f"Next: [bold]openenv validate {escape(str(target))}[/]  then  {escape(tests)}")
        console.print("Then rewrite README.md for your environment: it is served as /metadata's readme and the Space page.")
