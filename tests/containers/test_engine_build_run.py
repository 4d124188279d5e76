"""The echo environment end to end: generated Dockerfile, real build, real container, real server."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import httpx
import yaml
from rich.console import Console
from websockets.sync.client import connect as ws_connect

from openenv_sdk.build import build_image
from openenv_sdk.containers.dockerfile import healthcheck_command
from openenv_sdk.containers.labels import LABEL_MANIFEST, LABEL_NAME, LABEL_PORT
from openenv_sdk.providers import DockerProvider, Provider

from .conftest import ECHO_DIR, TEST_BASE_IMAGE, requires_engine

pytestmark = requires_engine


def _cached_steps(log: str) -> dict[str, bool]:
    """Instruction prefix of each build step -> whether the engine took it from its cache."""
    steps: dict[str, bool] = {}
    current = None
    for line in log.splitlines():
        match = re.search(r"step \d+/\d+ (.*)$", line)
        if match:
            current = match.group(1)
            steps[current] = False
        elif current is not None and "using cache" in line.lower():
            steps[current] = True
    return steps


def _was_cached(steps: dict[str, bool], prefix: str) -> bool:
    (cached,) = [cached for instruction, cached in steps.items() if instruction.startswith(prefix)]
    return cached


def test_engine_answers(engine) -> None:
    assert engine.ping() is True


def test_image_carries_the_manifest(engine, echo_image: str) -> None:
    labels = engine.images.get(echo_image).labels
    manifest = yaml.safe_load((ECHO_DIR / "openenv.yaml").read_text())
    assert labels[LABEL_NAME] == manifest["name"]
    assert labels[LABEL_PORT] == str(manifest["port"])
    assert json.loads(labels[LABEL_MANIFEST]) == manifest


def test_image_runs_the_server_as_non_root(engine, echo_image: str) -> None:
    config = engine.images.get(echo_image).attrs["Config"]
    assert config["User"] == "10001:10001"
    assert config["Cmd"][:3] == ["openenv", "serve", "/env"]


def test_echo_container_serves_health_and_a_websocket_episode(echo_image: str) -> None:
    with DockerProvider(echo_image, startup_timeout_s=60) as provider:
        assert isinstance(provider, Provider)
        assert provider.is_alive()
        health = httpx.get(f"{provider.base_url}/health", timeout=5)
        assert health.status_code == 200
        ws_url = provider.base_url.replace("http://", "ws://") + "/ws"
        auth = {"Authorization": f"Bearer {provider.orchestrator_token}"}
        with ws_connect(ws_url, open_timeout=10, close_timeout=5, additional_headers=auth) as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            reply = json.loads(ws.recv(timeout=10))
            assert reply["type"] == "observation"
            assert reply["data"]["observation"]["echoed_message"] == "Echo environment ready!"
            ws.send(json.dumps({"type": "step", "data": {"message": "hi there"}}))
            reply = json.loads(ws.recv(timeout=10))
            assert reply["type"] == "observation"
            assert reply["data"]["observation"]["echoed_message"] == "hi there"


def test_image_healthcheck_command_passes_in_a_healthy_container(echo_image: str) -> None:
    with DockerProvider(echo_image) as provider:
        container = provider._container
        assert container is not None
        result = container.exec_run(healthcheck_command(8000))
        assert result.exit_code == 0, result.output


def test_rebuild_after_a_code_edit_reuses_the_dependency_layers(engine, tmp_path: Path) -> None:
    folder = tmp_path / "echo"
    shutil.copytree(ECHO_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    tag = "openenv-test-echo-edit:latest"
    build_image(folder, tag=tag, base_image=TEST_BASE_IMAGE, engine=engine, output="quiet")
    with (folder / "echo_env.py").open("a") as f:
        f.write("\n# a one-line edit\n")
    console = Console(record=True, width=200, force_terminal=False)
    try:
        build_image(folder, tag=tag, base_image=TEST_BASE_IMAGE, engine=engine, output="full", console=console)
        steps = _cached_steps(console.export_text())
        # the virtualenv and the dependency wheels (copy + install) come from the cache
        for prefix in ("RUN python3 -m venv", "COPY wheels/deps", "RUN pip install --no-index --find-links"):
            assert _was_cached(steps, prefix), steps
        assert not _was_cached(steps, "COPY --chown"), steps
    finally:
        engine.images.remove(tag, force=True)
