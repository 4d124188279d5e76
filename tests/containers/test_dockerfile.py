"""Dockerfile generation, tags, base-image choice and early errors: no engine needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from openenv_sdk.build import build_image, default_tag, resolve_base_image
from openenv_sdk.containers.dockerfile import DockerfileSpec, healthcheck_command, render_dockerfile
from openenv_sdk.containers.engine import connect_engine, resolve_docker_host
from openenv_sdk.containers.errors import EngineUnavailableError
from openenv_sdk.containers.labels import LABEL_MANIFEST, image_labels, manifest_from_labels
from openenv_sdk.errors import ContainerError, ManifestError
from openenv_sdk.manifest import Manifest


def _spec(**overrides: object) -> DockerfileSpec:
    return DockerfileSpec.model_validate({"base_image": "python:3.11-slim", "port": 8000, **overrides})


def test_layers_go_from_dependencies_to_environment() -> None:
    text = render_dockerfile(_spec())
    order = [
        text.index(marker) for marker in ("COPY wheels/deps", "COPY wheels/sdk", "COPY --chown=10001:10001 env /env")
    ]
    assert order == sorted(order)


def test_install_is_offline_and_runs_as_non_root() -> None:
    text = render_dockerfile(_spec())
    assert "pip install --no-index --find-links" in text
    assert "USER 10001:10001" in text
    assert "curl" not in text


def test_entry_point_and_healthcheck_use_the_manifest_port() -> None:
    text = render_dockerfile(_spec(port=9123))
    assert 'CMD ["openenv", "serve", "/env", "--host", "0.0.0.0", "--port", "9123"]' in text
    assert "HEALTHCHECK" in text and json.dumps(healthcheck_command(9123)) in text
    assert "EXPOSE 9123" in text


def test_a_code_edit_rebuilds_only_the_last_step() -> None:
    text = render_dockerfile(_spec(labels={"org.openenv.name": "x"}))
    instructions = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert instructions[-1] == "COPY --chown=10001:10001 env /env"
    assert text.index("LABEL") > text.index("RUN pip install --no-index --no-deps")


def test_label_values_are_escaped_for_the_dockerfile() -> None:
    text = render_dockerfile(_spec(labels={"k": 'a "b" $HOME \\c'}))
    assert 'LABEL "k"="a \\"b\\" \\$HOME \\\\c"' in text


def test_manifest_label_round_trips() -> None:
    data = {"name": "demo", "port": 8100, "description": 'quotes " and $ and ü', "resources": {"memory": "1g"}}
    manifest = Manifest.model_validate(data)
    labels = image_labels(data, manifest, sdk_version="1.2.3")
    assert labels["org.openenv.name"] == "demo"
    assert labels["org.openenv.port"] == "8100"
    assert json.loads(labels[LABEL_MANIFEST]) == data
    restored = manifest_from_labels(labels)
    assert restored is not None and restored.resources.memory == "1g"
    assert manifest_from_labels({}) is None
    assert manifest_from_labels({LABEL_MANIFEST: "{not json"}) is None


@pytest.mark.parametrize(
    ("name", "tag"),
    [("echo", "openenv-echo:latest"), ("Echo Env", "openenv-echo-env:latest"), ("a_b", "openenv-a_b:latest")],
)
def test_default_tag(name: str, tag: str) -> None:
    assert default_tag(name) == tag


def test_base_image_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = Manifest(name="x", base_image="from-manifest:1")
    monkeypatch.delenv("OPENENV_BASE_IMAGE", raising=False)
    assert resolve_base_image(None, None) == "python:3.11-slim"
    assert resolve_base_image(None, manifest) == "from-manifest:1"
    monkeypatch.setenv("OPENENV_BASE_IMAGE", "from-env:1")
    assert resolve_base_image(None, manifest) == "from-env:1"
    assert resolve_base_image("from-arg:1", manifest) == "from-arg:1"


def test_docker_host_resolution() -> None:
    assert resolve_docker_host({"DOCKER_HOST": "tcp://h:2375"}) == "tcp://h:2375"


def test_unreachable_engine_is_a_typed_error_naming_the_setup_script(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailableError) as info:
        connect_engine(docker_host=f"unix://{tmp_path}/no-engine.sock")
    assert isinstance(info.value, ContainerError)
    assert "setup_container_engine.sh" in str(info.value)
    assert info.value.docker_host == f"unix://{tmp_path}/no-engine.sock"


def test_bad_manifest_fails_before_touching_an_engine(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("port: not-a-port\n")
    with pytest.raises(ManifestError, match="name"):
        build_image(tmp_path, docker_host="unix:///nonexistent.sock", output="quiet")


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file"):
        build_image(tmp_path, docker_host="unix:///nonexistent.sock", output="quiet")


def test_manifest_without_a_server_entry_says_what_to_add(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text(yaml.safe_dump({"name": "x", "port": 8000}))
    with pytest.raises(ManifestError, match="environment: module:Class"):
        build_image(tmp_path, docker_host="unix:///nonexistent.sock", output="quiet")
