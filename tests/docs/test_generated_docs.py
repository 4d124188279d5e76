"""The generated references are up to date, and the protocol schema matches real traffic."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from openenv_sdk import create_app
from openenv_sdk.loader import load_environment

ROOT = Path(__file__).resolve().parents[2]
WS_SCHEMA = ROOT / "docs" / "protocol" / "ws-messages.json"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"openenv_docs_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the script's annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "script", ["gen_cli_docs", "gen_protocol_schema", "gen_manifest_docs", "gen_attack_table", "gen_errors_doc"]
)
def test_generated_docs_are_up_to_date(script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [script, "--check"])
    assert _script(script).main() == 0, capsys.readouterr()


def test_the_cli_reference_names_every_command_and_option() -> None:
    import typer

    from openenv_sdk.cli.main import app

    text = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    group = typer.main.get_command(app)
    commands = []
    for name, command in group.commands.items():  # a group's subcommands in its place (`harbor import`)
        subcommands = getattr(command, "commands", None)
        commands += [(f"{name} {sub}", c) for sub, c in subcommands.items()] if subcommands else [(name, command)]
    for name, command in commands:
        assert f"## `openenv {name}`" in text
        for param in command.params:
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("-"):
                    assert f"`{flag}" in text or f" {flag}" in text, f"openenv {name} {flag}"


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    document = json.loads(WS_SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]})


def test_the_ws_schema_describes_real_traffic() -> None:
    """Every request sent and every reply the server gives validates against ws-messages.json."""
    client_schema, server_schema = _validator("ClientMessage"), _validator("ServerMessage")
    requests: list[dict[str, Any]] = [
        {"type": "session", "id": 1},
        {"type": "reset", "data": {"seed": 3}, "id": "r"},
        {"type": "step", "data": {"message": "hi"}, "id": 2},
        {"type": "step", "data": {"tool": "echo", "arguments": {"message": "yo"}}},
        {"type": "step", "data": {"type": "call_tool", "tool_name": "echo", "arguments": {"message": "x"}}},
        {"type": "step", "data": {"type": "list_tools"}},
        {"type": "step", "data": {"mesage": "typo"}, "id": 3},
        {"type": "state", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                 "params": {"name": "echo", "arguments": {"message": "m"}}}},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ecko"}}},
        {"type": "call", "data": {"name": "transcript"}},
        {"type": "call", "data": {"name": "transcrip"}},
    ]
    replies: list[dict[str, Any]] = []
    env_cls = load_environment(ROOT / "environments" / "echo").env_cls
    assert env_cls is not None
    with TestClient(create_app(env_cls)) as client, client.websocket_connect("/ws") as ws:
        for request in requests:
            client_schema.validate(request)
            ws.send_json(request)
            replies.append(ws.receive_json())
        ws.send_json({"type": "no_such_type"})  # not a ClientMessage; its error reply is a ServerMessage
        replies.append(ws.receive_json())
    for reply in replies:
        server_schema.validate(reply)
    kinds = [reply["type"] for reply in replies]
    assert set(kinds) == {"session", "observation", "error", "state", "mcp", "result"}
    assert replies[6]["data"]["code"] == "VALIDATION_ERROR" and replies[6]["id"] == 3
    assert replies[-1]["data"]["code"] == "UNKNOWN_TYPE"


def test_the_ws_schema_refuses_what_the_server_refuses() -> None:
    client_schema = _validator("ClientMessage")
    for bad in [{"type": "no_such_type"}, {"type": "call", "data": {}}, {"data": {}}, {"type": "reset", "id": 1.5}]:
        assert not client_schema.is_valid(bad), bad


def test_the_openapi_document_is_what_a_server_serves() -> None:
    document = json.loads((ROOT / "docs" / "protocol" / "openapi.json").read_text(encoding="utf-8"))
    env_cls = load_environment(ROOT / "environments" / "echo").env_cls
    assert env_cls is not None
    with TestClient(create_app(env_cls)) as client:
        assert client.get("/openapi.json").json() == document
    assert {"/health", "/metadata", "/schema", "/sessions", "/reset", "/step", "/state", "/call/{name}"} <= set(
        document["paths"]
    )
