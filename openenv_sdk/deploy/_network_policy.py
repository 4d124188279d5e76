"""The NetworkPolicy of an environment's pods: default deny, then what the manifest allows.

    ingress   only to the server's port, only from the pods that `ingress_from` selects
              (default: pods labelled `openenv.io/client: "true"` in the same namespace)
    egress    network policy `none`: nothing at all (no DNS either)
              `allowlist`: DNS to the cluster's resolver, and TCP to public addresses on the
              allowlist's ports; the server's proxy lets commands reach the listed names only
              `bridge`: DNS, and public addresses on any port (the server's own egress)

A NetworkPolicy selects by address, not by name: the names in `network.allow` stay the in-pod
proxy's to enforce. Private, loopback, link-local (the cloud metadata endpoint) and shared
addresses are never allowed out, so the pod reaches nothing else in the cluster either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_sdk.manifest import Manifest
from openenv_sdk.sandbox._allowlist import parse_allow

__all__ = ["DEFAULT_CLIENT_LABELS", "network_policy"]

DEFAULT_CLIENT_LABELS = {"openenv.io/client": "true"}
"""The pods allowed in by default: label the orchestrator's (the trainer's) pods with it."""

_PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "169.254.0.0/16", "100.64.0.0/10", "0.0.0.0/8"]
_PRIVATE_V6 = ["fc00::/7", "fe80::/10", "::1/128", "::ffff:0:0/96"]
_DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}


def network_policy(
    manifest: Manifest,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    pod_selector: Mapping[str, str],
    ingress_namespaces: Mapping[str, str] | None = None,
    ingress_pods: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The NetworkPolicy for the pods `pod_selector` selects (see the module docstring).

    `ingress_namespaces`: labels of the namespaces whose pods may connect (default: this one);
    `ingress_pods`: labels of the pods that may (default `DEFAULT_CLIENT_LABELS`, or every pod of
    the selected namespaces when `ingress_namespaces` is given alone).
    """
    peer: dict[str, Any] = {}
    if ingress_namespaces is not None:
        peer["namespaceSelector"] = {"matchLabels": dict(ingress_namespaces)}
    if ingress_pods is not None or ingress_namespaces is None:
        peer["podSelector"] = {"matchLabels": dict(DEFAULT_CLIENT_LABELS if ingress_pods is None else ingress_pods)}
    ingress = [{"from": [peer], "ports": [{"protocol": "TCP", "port": manifest.port}]}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "podSelector": {"matchLabels": dict(pod_selector)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": _egress(manifest),
        },
    }


def _egress(manifest: Manifest) -> list[dict[str, Any]]:
    policy = manifest.network.policy
    if policy == "none":
        return []
    public = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": _PRIVATE_V4}}, {"ipBlock": {"cidr": "::/0", "except": _PRIVATE_V6}}]
    if policy == "bridge":
        return [_DNS, {"to": public}]
    ports = sorted({port for rule in parse_allow([*manifest.network.allow, *manifest.network.grading_allow]) for port in rule.ports})
    return [_DNS, {"to": public, "ports": [{"protocol": "TCP", "port": port} for port in ports]}]
