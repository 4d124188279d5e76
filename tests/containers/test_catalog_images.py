"""Every environment the catalog ships, as a new user meets it: `openenv validate PATH`,
`openenv build`, `openenv validate --image`, then an episode through
`GenericEnvClient(image=...)` graded host-side. Also: the conformance suite against a container,
and a pool spreading sessions over two containers. No container is left running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from openenv_sdk.build import build_image
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.loader import import_ref
from openenv_sdk.manifest import load_catalog, load_manifest
from openenv_sdk.providers import DockerProvider, ServerPool
from openenv_sdk.rubric import grade

from .conftest import TEST_BASE_IMAGE, requires_engine

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT)
# One cheap, valid tool call per environment: the agent's side of the episode.
FIRST_CALL = {
    "echo": ({}, "echo", {"message": "hi"}),
    "wordle": ({"task_id": 0}, "guess", {"word": "crane"}),
    "coding": ({}, "run_shell", {"command": "echo hi"}),
    "terminal": ({"task_id": "count_log_files"}, "bash", {"command": "echo hi"}),
    "mini_swe": ({"task_id": "datekit-1"}, "run", {"command": "echo hi"}),
}

pytestmark = requires_engine


def _openenv(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "openenv_sdk.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


def _managed_containers() -> list[object]:
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": "org.openenv.managed=1"})
    finally:
        client.close()


def test_every_catalog_environment_is_covered() -> None:
    assert sorted(entry.name for entry in CATALOG.environments) == sorted(FIRST_CALL)


@pytest.mark.parametrize("name", [entry.name for entry in CATALOG.environments])
def test_validate_build_and_play_from_the_image(name: str) -> None:
    folder = ROOT / dict((e.name, e.path) for e in CATALOG.environments)[name]
    static = _openenv("validate", str(folder), "--static-only")
    assert static.returncode == 0, static.stdout + static.stderr
    tag = build_image(folder, tag=f"openenv-catalog-{name}:test", base_image=TEST_BASE_IMAGE, output="quiet")
    checked = _openenv("validate", "--image", tag)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    task, tool, arguments = FIRST_CALL[name]
    manifest = load_manifest(folder)
    with GenericEnvClient(image=tag) as env:
        env.reset(**task)
        assert tool in [t.name for t in env.list_tools()]
        result = env.call_tool(tool, **arguments)
        assert not result.is_error, result.content
        if manifest.grader:
            score = grade(import_ref(folder, manifest.grader, what="grader")(), env)
            assert 0.0 <= score.value  # graded host-side, over the episode that just ran
    assert not [c for c in _managed_containers() if tag in str(getattr(c, "image", ""))]


def test_the_conformance_suite_passes_against_a_container(echo_image: str) -> None:
    # the suite speaks the OpenEnv-compatible protocol, which has no orchestrator token
    with DockerProvider(echo_image, orchestrator_token=False) as provider:
        url = provider.start()
        env = {**os.environ, "OPENENV_CONFORMANCE_URL": url}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "conformance")],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            check=False,
        )
    assert run.returncode == 0, run.stdout[-3000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_a_pool_spreads_sessions_over_containers(echo_image: str) -> None:
    with ServerPool(lambda: DockerProvider(echo_image), size=2) as pool:
        clients = [pool.client() for _ in range(6)]
        assert sorted(pool.load().values()) == [3, 3]
        for i, client in enumerate(clients):
            client.reset()
            assert client.step({"message": f"s{i}"}).observation["echoed_message"] == f"s{i}"
            client.close()
    assert _managed_containers() == []
