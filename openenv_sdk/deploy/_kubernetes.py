"""Kubernetes objects for an environment image: a Secret, a Deployment and a Service.

    Secret       the orchestrator token (`OPENENV_ORCHESTRATOR_TOKEN`), new at each generation
    Deployment   `replicas` pods of the image, the manifest's cpus and memory as requests and
                 limits, readiness and liveness probes on `GET /health`
    Service      a ClusterIP in front of the pods, on the manifest's port

The objects are plain dicts (`yaml.safe_dump_all` writes them); nothing here talks to a cluster.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import yaml

from openenv_sdk.manifest import load_manifest
from openenv_sdk.types import ORCHESTRATOR_TOKEN_VAR

__all__ = ["kubernetes_objects", "kubernetes_yaml"]

_TOKEN_KEY = "orchestrator-token"


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:50].strip("-")
    if not name:
        raise ValueError(f"cannot make a Kubernetes name of {text!r}: pass name=")
    return name


def kubernetes_objects(
    env_dir: str | Path,
    *,
    image: str,
    replicas: int = 1,
    name: str | None = None,
    namespace: str = "default",
    orchestrator_token: str | None = None,
) -> list[dict[str, Any]]:
    """The Secret, Deployment and Service that run `image` (built from `env_dir`) on Kubernetes.

    Args:
        env_dir: the environment folder; its `openenv.yaml` gives the name, port and resources.
        image: the environment image, e.g. `registry.example/openenv-echo:0.1.0` (`openenv build`).
        replicas: how many pods (servers).
        name: the objects' name; default the manifest's name, as a DNS label.
        namespace: the namespace of every object.
        orchestrator_token: the servers' token; default a new random one (the Secret holds it:
            treat the generated objects as secret).

    Raises:
        ValueError: `replicas` is below 1, or no valid name can be made.
        ManifestError: the folder's `openenv.yaml` is missing or invalid.
    """
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    manifest = load_manifest(Path(env_dir) / "openenv.yaml")
    name = _dns_name(name or manifest.name)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "openenv"}
    token = orchestrator_token or secrets.token_urlsafe(32)
    resources = {"cpu": f"{manifest.resources.cpus:g}", "memory": str(manifest.resources.memory_bytes)}
    probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 2}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-orchestrator", "namespace": namespace, "labels": labels},
        "type": "Opaque",
        "stringData": {_TOKEN_KEY: token},
    }
    container = {
        "name": "server",
        "image": image,
        "ports": [{"name": "http", "containerPort": manifest.port, "protocol": "TCP"}],
        "env": [
            {
                "name": ORCHESTRATOR_TOKEN_VAR,
                "valueFrom": {"secretKeyRef": {"name": f"{name}-orchestrator", "key": _TOKEN_KEY}},
            }
        ],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "readinessProbe": {**probe, "failureThreshold": 3},
        "livenessProbe": {**probe, "initialDelaySeconds": 10, "failureThreshold": 6},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": name},
            "ports": [{"name": "http", "port": manifest.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    return [secret, deployment, service]


def kubernetes_yaml(env_dir: str | Path, *, image: str, **options: Any) -> str:
    """`kubernetes_objects(...)` as one multi-document YAML text, for `kubectl apply -f -`."""
    return yaml.safe_dump_all(kubernetes_objects(env_dir, image=image, **options), sort_keys=False)
