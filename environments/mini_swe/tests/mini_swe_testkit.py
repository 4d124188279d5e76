"""Helpers of mini_swe's tests (a uniquely named module: every environment has a `tests/`)."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

ENV_DIR = Path(__file__).resolve().parents[1]
if str(ENV_DIR) not in sys.path:
    sys.path.insert(0, str(ENV_DIR))

IS_ROOT = os.geteuid() == 0

SERVER_TOKENS: dict[str, str] = {}
"""Orchestrator tokens of the servers these tests started, by base URL (filled by the fixtures)."""


def open_client(url: str, **kwargs: Any) -> Any:
    """A new client (so a new session) of the server at `url`, with its orchestrator token."""
    from openenv_sdk.client import GenericEnvClient

    token = SERVER_TOKENS.get(url)
    return GenericEnvClient(url, **({"orchestrator_token": token} if token else {}), **kwargs)


def register_server(owner: Any) -> str:
    """Remember the token of the server a client (or provider) started; returns its base URL."""
    provider = getattr(owner, "provider", owner)
    url = owner.base_url if hasattr(owner, "base_url") else provider.base_url
    token = getattr(provider, "orchestrator_token", None)
    if token:
        SERVER_TOKENS[url] = token
    return url


def load_grader_module() -> Any:
    """`grader.py` of this folder under a unique name (other environments have a `grader` module too)."""
    name = "mini_swe_grader_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ENV_DIR / "grader.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def text_of(result: Any) -> str:
    """The text of an MCP `CallToolResult`."""
    return "".join(getattr(part, "text", "") for part in result.content)


def call(client: Any, name: str, /, **arguments: Any) -> str:
    """Call an agent tool over MCP; the call must succeed. Returns its text."""
    result = client.call_tool(name, **arguments)
    text = text_of(result)
    assert not result.is_error, f"{name}({arguments}) failed: {text}"
    return text


def call_error(client: Any, name: str, /, **arguments: Any) -> str:
    """Call an agent tool over MCP; the call must fail as a tool error. Returns its text."""
    result = client.call_tool(name, **arguments)
    text = text_of(result)
    assert result.is_error, f"{name}({arguments}) should have failed, got: {text}"
    return text


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_unified_diff(patch: str, read: Any) -> dict[str, str]:
    """The files a unified diff (`a/` `b/` prefixes, no fuzz) produces: `{path: new text}`.

    `read(path)` gives a file's current text. Used where neither git nor patch exists (a slim
    image); the local replay applies the same patches with `git apply`.
    """
    out: dict[str, str] = {}
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        path = lines[i + 1][4:].strip().split("\t")[0].removeprefix("b/")
        old = read(path).splitlines(keepends=True)
        new: list[str] = []
        cursor = 0
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            start = int(_HUNK.match(lines[i]).group(1)) - 1  # type: ignore[union-attr]
            new.extend(old[cursor:start])
            cursor = start
            i += 1
            while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
                tag, body = lines[i][:1], lines[i][1:]
                if tag in (" ", "-"):
                    assert old[cursor] == body, f"{path}: hunk does not apply at line {cursor + 1}"
                    cursor += 1
                if tag in (" ", "+"):
                    new.append(body)
                i += 1
        new.extend(old[cursor:])
        out[path] = "".join(new)
    return out
