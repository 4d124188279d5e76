"""Fixtures for tests against a real container engine (Podman or Docker Engine).

Engine tests run only with OPENENV_TEST_CONTAINERS=1 (CI sets it after
`scripts/setup_container_engine.sh`); they build real images and run real containers.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ECHO_DIR = REPO / "environments" / "echo"
TEST_BASE_IMAGE = os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm")

requires_engine = pytest.mark.skipif(
    os.environ.get("OPENENV_TEST_CONTAINERS") != "1",
    reason="needs a container engine: set OPENENV_TEST_CONTAINERS=1 (after scripts/setup_container_engine.sh)",
)


@pytest.fixture(scope="session")
def engine() -> Iterator[object]:
    from openenv_sdk.containers.engine import connect_engine

    client = connect_engine()
    yield client
    client.close()


@pytest.fixture(scope="session")
def echo_image(engine: object) -> str:
    """The echo environment built with the generated Dockerfile (cached layers make reruns quick)."""
    from openenv_sdk.build import build_image

    return build_image(
        ECHO_DIR, tag="openenv-test-echo:latest", base_image=TEST_BASE_IMAGE, engine=engine, output="quiet"
    )


@pytest.fixture(scope="session")
def probe_image(engine: object, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny image from an environment folder with its own Dockerfile: a server that answers
    /health, and /egress with whether it can reach the outside."""
    from openenv_sdk.build import build_image

    folder = tmp_path_factory.mktemp("probe_env")
    shutil.copytree(Path(__file__).parent / "fixtures" / "probe_env", folder, dirs_exist_ok=True)
    dockerfile = (folder / "Dockerfile.in").read_text().replace("@BASE@", TEST_BASE_IMAGE)
    (folder / "Dockerfile").write_text(dockerfile)
    return build_image(folder, tag="openenv-test-probe:latest", engine=engine, output="quiet")


def make_env_dir(root: Path, *, dockerfile: str, manifest: str = "name: broken\nport: 8000\n") -> Path:
    """An environment folder with its own Dockerfile (for failure cases)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "openenv.yaml").write_text(manifest)
    (root / "Dockerfile").write_text(dockerfile.replace("@BASE@", TEST_BASE_IMAGE))
    return root
