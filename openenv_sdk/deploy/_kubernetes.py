"""Kubernetes objects for an environment image: a Secret, a Deployment, a Service and a NetworkPolicy.

    Secret         the orchestrator token, new at each generation, mounted as a file that the
                   server reads (`OPENENV_ORCHESTRATOR_TOKEN_FILE`: `openenv serve --orchestrator-token-file`)
    Deployment     `replicas` pods of the image, the manifest's cpus and memory as requests and
                   limits, readiness and liveness probes on `GET /health`, locked down as
                   `_pod_security` says (bubblewrap's needs only for a sandboxed environment)
    Service        a ClusterIP in front of the pods, on the manifest's port
    NetworkPolicy  default deny; in, the server's port from the selected clients; out, what the
                   manifest's network section allows (`_network_policy`)

The objects are plain dicts (`yaml.safe_dump_all` writes them); nothing here talks to a cluster.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from openenv_sdk.manifest import load_manifest
from openenv_sdk.types import ORCHESTRATOR_TOKEN_FILE_VAR

from ._network_policy import network_policy
from ._pod_security import checkov_annotations, pod_security

__all__ = ["kubernetes_objects", "kubernetes_yaml"]

_TOKEN_KEY = "orchestrator-token"
TOKEN_DIR = "/var/lib/openenv/orchestrator"
"""Where the Secret's token is mounted: a file, not a variable; outside the folders a sandbox shows its commands."""


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
    ingress_namespaces: Mapping[str, str] | None = None,
    ingress_pods: Mapping[str, str] | None = None,
    apparmor: str | None = None,
    user_namespace: bool = False,
) -> list[dict[str, Any]]:
    """The Secret, Deployment, Service and NetworkPolicy that run `image` (built from `env_dir`) on Kubernetes.

    Args:
        env_dir: the environment folder; its `openenv.yaml` gives the name, port and resources.
        image: the environment image, e.g. `registry.example/openenv-echo:0.1.0` (`openenv build`).
        replicas: how many pods (servers).
        name: the objects' name; default the manifest's name, as a DNS label.
        namespace: the namespace of every object.
        orchestrator_token: the servers' token; default a new random one (the Secret holds it:
            treat the generated objects as secret).
        ingress_namespaces: labels of the namespaces whose pods may reach the server (default: its own).
        ingress_pods: labels of the pods that may reach it (default `openenv.io/client: "true"`;
            every pod of `ingress_namespaces` when only those are given).
        apparmor: the server's AppArmor profile: `unconfined` (a sandboxed environment's
            default: the runtimes' default profiles deny bubblewrap's mounts), `runtime/default`
            (the default otherwise) or `localhost/NAME` (a profile loaded on every node).
        user_namespace: run a sandboxed environment's pod in a user namespace of its own
            (`hostUsers: false`; needs a cluster with user namespaces).

    Raises:
        ValueError: `replicas` is below 1, no valid name can be made, a bad `apparmor`, or
            `user_namespace` for an environment without a sandbox.
        ManifestError: the folder's `openenv.yaml` is missing or invalid.
    """
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    manifest = load_manifest(Path(env_dir) / "openenv.yaml")
    name = _dns_name(name or manifest.name)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "openenv"}
    token = orchestrator_token or secrets.token_urlsafe(32)
    security = pod_security(manifest, apparmor=apparmor, user_namespace=user_namespace)
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
        "env": [{"name": ORCHESTRATOR_TOKEN_FILE_VAR, "value": f"{TOKEN_DIR}/token"}, *security.env],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "readinessProbe": {**probe, "failureThreshold": 3},
        "livenessProbe": {**probe, "initialDelaySeconds": 10, "failureThreshold": 6},
        "securityContext": security.container,
        "volumeMounts": [{"name": "orchestrator-token", "mountPath": TOKEN_DIR, "readOnly": True}, *security.volume_mounts],
    }
    token_volume = {
        "name": "orchestrator-token",
        # 0440: root, or the image's user through the pod's fsGroup, reads it; a session uid does not
        "secret": {"secretName": f"{name}-orchestrator", "items": [{"key": _TOKEN_KEY, "path": "token"}], "defaultMode": 0o440},
    }
    annotations = checkov_annotations(manifest)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, **({"annotations": annotations} if annotations else {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {**security.pod, "containers": [container], "volumes": [token_volume, *security.volumes]},
            },
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
    policy = network_policy(
        manifest,
        name=name,
        namespace=namespace,
        labels=labels,
        pod_selector={"app.kubernetes.io/name": name},
        ingress_namespaces=ingress_namespaces,
        ingress_pods=ingress_pods,
    )
    return [secret, deployment, service, policy]


def kubernetes_yaml(env_dir: str | Path, *, image: str, **options: Any) -> str:
    """`kubernetes_objects(...)` as one multi-document YAML text, for `kubectl apply -f -`."""
    return yaml.dump_all(kubernetes_objects(env_dir, image=image, **options), Dumper=_PlainDumper, sort_keys=False)


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared between objects (the labels, say) in full each time, never as a YAML alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
