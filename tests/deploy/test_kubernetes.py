"""The Kubernetes objects for an environment image, validated offline against the Kubernetes API
schema (`kubernetes-validate`, strict: unknown fields are errors)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openenv_sdk.deploy import kubernetes_objects, kubernetes_yaml
from openenv_sdk.types import ORCHESTRATOR_TOKEN_VAR

kubernetes_validate = pytest.importorskip("kubernetes_validate")

ECHO = Path(__file__).resolve().parents[2] / "environments" / "echo"
KUBERNETES_VERSION = "1.30"


def test_the_objects_are_valid_kubernetes_objects() -> None:
    for document in yaml.safe_load_all(kubernetes_yaml(ECHO, image="openenv-echo:0.1.0", replicas=3)):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_validator_refuses_a_broken_object() -> None:
    deployment = kubernetes_objects(ECHO, image="openenv-echo:0.1.0")[1]
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eight thousand"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_manifest_resources_probes_and_the_token_secret() -> None:
    secret, deployment, service = kubernetes_objects(ECHO, image="img:1", replicas=2, orchestrator_token="t0k")
    assert [o["kind"] for o in (secret, deployment, service)] == ["Secret", "Deployment", "Service"]
    assert secret["stringData"] == {"orchestrator-token": "t0k"}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    assert container["resources"]["requests"] == {"cpu": "1", "memory": str(2 * 2**30)}  # manifest defaults
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["env"] == [
        {"name": ORCHESTRATOR_TOKEN_VAR, "valueFrom": {"secretKeyRef": {"name": "echo-orchestrator", "key": "orchestrator-token"}}}
    ]
    assert service["spec"]["ports"][0]["port"] == container["ports"][0]["containerPort"] == 8000
    assert kubernetes_objects(ECHO, image="img:1")[0]["stringData"] != kubernetes_objects(ECHO, image="img:1")[0]["stringData"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="replicas must be at least 1, got 0"):
        kubernetes_objects(ECHO, image="img:1", replicas=0)
    with pytest.raises(ValueError, match="cannot make a Kubernetes name of '!!!': pass name="):
        kubernetes_objects(ECHO, image="img:1", name="!!!")


def test_the_module_prints_the_objects() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "openenv_sdk.deploy", str(ECHO), "--image", "img:1", "--name", "Echo Env"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(out)] == ["echo-env-orchestrator", "echo-env", "echo-env"]
