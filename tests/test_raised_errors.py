"""Every class the SDK raises is in the tree drawn in `openenv_sdk.errors`' docstring.

The walk reads each `raise X(...)` in `openenv_sdk/` (ast): a class defined in the SDK must be
drawn in the tree (and derive from the class drawn above it), or be one of the internal signals
listed below, each caught inside the SDK before a user could see it. A builtin class is allowed
only where it is listed below with the reason a class of the tree would be wrong.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections import defaultdict
from pathlib import Path

import openenv_sdk.errors as errors

PACKAGE = Path(errors.__file__).resolve().parent

INTERNAL = {
    "RequestRefused": "the server's typed refusal inside a request: the routes send it as the wire error",
    "EnvironmentAborted": "the worker's signal that environment code was abandoned: the session answers it",
    "_Expired": "the runner's signal that a queued call outlived its deadline: answered as TIMEOUT",
    "ConnectionEnded": "the client's signal that its WebSocket closed: raised to users as TransportError",
    "Dropped": "the client's signal that a request was lost with its connection: retried or TransportError",
    "_TokenProblem": "`openenv serve`'s token check: printed as the command's one-line error",
    "_ImportFailed": "the grading worker's signal for its parent: sent as SolutionImportError",
    "CodecError": "the grading codec's refusal: the channel raises it as ProtocolError / NotSendable",
    "EgressRefused": "the egress proxy's refusal of a connection: answered to the sandbox as a denied request",
}
"""SDK classes that never leave the SDK: each is caught where it is raised, or one call up."""

FOREIGN = {
    "Exit": "typer's way to end a command with a status (the CLI's sink prints the error first)",
    "MCPError": "the official MCP server's protocol error (JSON-RPC), which the MCP SDK answers",
    "UsageError": "pytest's own error for a bad command line, raised inside the pytest plugin",
    "HttpRequestRejected": "proxy.py's refusal inside the egress proxy's plugin",
    "ResetNeeded": "gymnasium's own error for a step before reset, raised by the Gymnasium adapter",
    "QueueEmpty": "asyncio's Queue protocol (`get_nowait` on an empty queue), kept by a queue written to it",
}
"""Classes of other packages, raised where that package expects them."""

BUILTINS = {
    "ValueError": "a bad argument from the calling code (Python's convention, as httpx and the MCP SDK do)",
    "TypeError": "an argument of the wrong type from the calling code",
    "KeyError": "a missing key in a mapping the SDK implements",
    "LookupError": "an unknown task id / split in a task source (tasks.py), a missing remote name",
    "AttributeError": "module `__getattr__` and proxies: Python's protocol requires it",
    "NotImplementedError": "an abstract hook the subclass must implement",
    "ImportError": "an optional dependency is missing: the message names the extra to install",
    "TimeoutError": "the deadline of a wait inside a module that maps it (runner, sandbox command)",
    "OSError": "a filesystem operation refused (the workspace's bounds): callers handle OSError",
    "FileNotFoundError": "a task folder or file that does not exist",
    "AssertionError": "an invariant of the SDK's own state (not input checking: never stripped by -O here)",
    "KeyboardInterrupt": "the egress proxy's signal handler ends its process as Ctrl-C does",
    "StopIteration": "the iterator protocol",
    "StopAsyncIteration": "the async iterator protocol",
}
"""Builtin classes the SDK may raise, and why a class of the tree would be wrong there."""

BUILTIN_SITES = {
    ("agents/builtin.py", "RuntimeError"): "the built-in agent runs in the sandbox with the stdlib only",
    ("grading/_script.py", "RuntimeError"): "an invariant of the SDK's own source files, checked at import",
    ("fault_injection.py", "RuntimeError"): "the injected fault: an environment's reset raising as a buggy one does",
}
"""Builtins allowed at one module only (module path under openenv_sdk/, class)."""

STANDALONE = {
    "NotARepository": "grading/trusted_git.py runs as `python3 -I -S` in a sandbox, where the SDK cannot "
    "be imported: a ValueError, never an OpenEnvError",
}
"""SDK classes off the tree because their module runs without the SDK."""


def _drawn() -> dict[str, str | None]:
    """Each class drawn in `openenv_sdk.errors`' docstring, with the class drawn above it (None
    for a root): the nearest earlier name drawn further left."""
    parents: dict[str, str | None] = {}
    drawn: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^[\s│├└─]*([A-Z][A-Za-z]+)(\s|$)", line)
        if not match or not line.startswith("    "):
            drawn = [] if not line.strip() else drawn
            continue
        column, name = match.start(1), match.group(1)
        above = [n for c, n in drawn if c < column]
        parents[name] = above[-1] if above else None
        drawn = [(c, n) for c, n in drawn if c < column] + [(column, name)]
    return parents


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "templates" not in p.parts)


def _is_builtin_exception(name: str) -> bool:
    builtin = getattr(builtins, name, None)
    return isinstance(builtin, type) and issubclass(builtin, BaseException)


def _sdk_exception_classes() -> dict[str, list[type[BaseException]]]:
    """Every exception class defined in the SDK, by name. Found in the source (a class whose bases
    lead to a builtin exception), then imported from its module: only those modules are imported."""
    bases: dict[tuple[Path, str], list[str]] = {}
    for path in _modules():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases[(path, node.name)] = [ast.unparse(b).split(".")[-1] for b in node.bases]
    by_name = defaultdict(list)
    for (_, name), names in bases.items():
        by_name[name].extend(names)
    exceptions: set[str] = set()
    changed = True
    while changed:  # a class is an exception when one of its bases is
        changed = False
        for name, names in by_name.items():
            if name not in exceptions and any(_is_builtin_exception(b) or b in exceptions for b in names):
                exceptions.add(name)
                changed = True
    found: dict[str, list[type[BaseException]]] = defaultdict(list)
    for (path, name) in bases:
        if name not in exceptions:
            continue
        module = importlib.import_module(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        cls = getattr(module, name)
        assert isinstance(cls, type) and issubclass(cls, BaseException), f"{module.__name__}.{name}"
        found[name].append(cls)
    return found


def _raised() -> list[tuple[str, int, str]]:
    """(module path under openenv_sdk/, line, class name) of each `raise Name(...)` / `raise Name`."""
    sites = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            if name and name[:1].isupper() or name in ("_Expired", "_TokenProblem", "_ImportFailed"):
                sites.append((path.relative_to(PACKAGE).as_posix(), node.lineno, name))
    return sites


SDK_CLASSES = _sdk_exception_classes()


def test_every_exception_class_name_is_defined_once() -> None:
    """One owner per concept: no second `ProtocolError`, `ToolError`, ... under another module."""
    twice = {name: [c.__module__ for c in classes] for name, classes in SDK_CLASSES.items() if len(classes) > 1}
    assert twice == {}
    assert [c.__module__ for c in SDK_CLASSES["ProtocolError"]] == ["openenv_sdk.grading._errors"]


def test_every_drawn_class_exists_under_its_drawn_parent() -> None:
    for name, parent in _drawn().items():
        assert name in SDK_CLASSES, f"{name} is drawn in errors.py but defined nowhere in openenv_sdk"
        cls = SDK_CLASSES[name][0]
        if parent is not None:
            assert cls.__bases__[0] is SDK_CLASSES[parent][0], f"{name} is drawn under {parent}"


def test_the_open_env_tree_has_one_root() -> None:
    drawn = _drawn()
    for name, parent in drawn.items():
        cls = SDK_CLASSES[name][0]
        if parent is None:
            continue
        root = name
        while drawn[root] is not None:
            root = drawn[root]  # type: ignore[assignment]
        assert issubclass(cls, SDK_CLASSES[root][0])
    roots = sorted(name for name, parent in drawn.items() if parent is None)
    assert roots == ["ChannelError", "OpenEnvError", "RemoteError"]


def _problem(where: str, line: int, name: str) -> str | None:
    site = f"openenv_sdk/{where}:{line} raises {name}"
    if name in SDK_CLASSES:
        if name in _drawn() or name in INTERNAL or name in STANDALONE:
            return None
        return f"{site}: draw it in errors.py's tree (or list it here as INTERNAL, with the reason)"
    if _is_builtin_exception(name):
        if name in BUILTINS or (where, name) in BUILTIN_SITES:
            return None
        return f"{site}: a builtin the user would catch blindly; raise a class of the tree (errors.py)"
    if name in FOREIGN:
        return None
    return f"{site}: neither the SDK's class, a builtin, nor a listed foreign class"


def test_every_raised_class_is_drawn_or_listed() -> None:
    problems = [p for p in (_problem(*site) for site in _raised()) if p is not None]
    assert problems == []


def test_the_lists_name_only_what_exists() -> None:
    for name in INTERNAL:
        assert name in SDK_CLASSES and name not in _drawn(), name
    for name in STANDALONE:
        assert name in SDK_CLASSES and name not in _drawn(), name
    sites = {(where, name) for where, _, name in _raised()}
    for where, name in BUILTIN_SITES:
        assert (where, name) in sites and name not in BUILTINS, (where, name)
