"""Every shipped sandboxed environment (and the `code` scaffold) holds its tool commands to the
manifest's `network.allow`: a listed name is reached through the allowlist proxy, a name off the
list is refused. Each case serves a copy of the environment folder (`openenv serve`, a real
server on a real port) whose `openenv.yaml` lists one name, pinned by the operator
(`OPENENV_EGRESS_PINS`) to a local HTTP server, as tests/security/test_network.py does."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from openenv_sdk.cli.init import scaffold
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.sandbox import EGRESS_PINS_ENV

REPO = Path(__file__).resolve().parents[2]
ALLOWED = "example-allowed-host"
BODY = "allowed host says hi"

FETCH = (
    "import os, urllib.request, urllib.error\n"
    "for url in ({urls}):\n"
    "    try:\n"
    "        print(url, urllib.request.urlopen(url, timeout=10).read().decode())\n"
    "    except urllib.error.HTTPError as e:\n"
    "        print(url, 'refused', e.code)\n"
    "    except OSError as e:\n"
    "        print(url, 'failed', type(e).__name__)\n"
)
"""Python's urllib takes the proxy from HTTP_PROXY, as the egress plan sets it."""


class _Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = BODY.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def allowed_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Named)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _served_copy(source: Path, target: Path, port: int) -> Path:
    """`source` as its image holds it (no hidden/, no tests/), its manifest allowing one name."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("hidden", "tests", "__pycache__"))
    manifest_file = target / "openenv.yaml"
    data = yaml.safe_load(manifest_file.read_text())
    data["network"] = {"policy": "allowlist", "allow": [f"{ALLOWED}:{port}"]}
    manifest_file.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def _text(result: object) -> str:
    return "".join(getattr(part, "text", "") for part in getattr(result, "content", []))


def _fetch(env: GenericEnvClient, name: str, port: int) -> str:
    """Run FETCH through the environment's own tool for running code."""
    urls = f"'http://{ALLOWED}:{port}/', 'http://not-allowed.example:{port}/', 'http://127.0.0.1:{port}/',"
    code = FETCH.format(urls=urls)
    if name in ("coding", "scaffold"):
        return _text(env.call_tool("run_python", code=code))
    shell = f"python3 - <<'EOF'\n{code}EOF"
    return _text(env.call_tool("bash" if name == "terminal" else "run", command=shell))


@pytest.mark.parametrize("name", ["coding", "terminal", "mini_swe", "scaffold"])
def test_the_manifest_allowlist_reaches_tool_commands_and_nothing_else(
    name: str, allowed_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest's `network.allow` reaches an environment's tool commands through the proxy; a name off the list is refused (403), an address reaches nothing."""
    if name == "scaffold":
        scaffold("egress_probe", tmp_path / "made", "code")
        source = tmp_path / "made" / "egress_probe"
    else:
        source = REPO / "environments" / name
    served = _served_copy(source, tmp_path / "served" / source.name, allowed_server)
    monkeypatch.setenv(EGRESS_PINS_ENV, json.dumps({ALLOWED: "127.0.0.1"}))  # the operator's pin, in the server's environment
    with GenericEnvClient(env_dir=served, startup_timeout_s=120) as env:
        env.reset(**({"task_id": "fizzbuzz"} if name == "coding" else {}))
        out = _fetch(env, name, allowed_server)
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("http://")}
    assert lines.get(f"http://{ALLOWED}:{allowed_server}/") == BODY, out
    assert lines.get(f"http://not-allowed.example:{allowed_server}/") == "refused 403", out
    # an address is never proxied (NO_PROXY names loopback), and the sandbox's own loopback has nothing there
    assert lines.get(f"http://127.0.0.1:{allowed_server}/") == "failed URLError", out


def test_without_an_allowlist_tool_commands_reach_nothing(allowed_server: int, tmp_path: Path) -> None:
    """The control: the shipped coding manifest (policy none) gives tool commands no proxy and no resolver."""
    served = tmp_path / "coding"
    shutil.copytree(REPO / "environments" / "coding", served, ignore=shutil.ignore_patterns("hidden", "tests", "__pycache__"))
    with GenericEnvClient(env_dir=served, startup_timeout_s=120) as env:
        env.reset(task_id="fizzbuzz")
        out = _fetch(env, "coding", allowed_server)
    assert f"http://{ALLOWED}:{allowed_server}/ failed" in out, out
    assert f"http://127.0.0.1:{allowed_server}/ failed" in out, out
