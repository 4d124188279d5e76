"""Deployment objects for running environment images on a cluster.

    kubernetes_objects   a Secret (the orchestrator token), a Deployment, a Service and a
                         NetworkPolicy, as dicts (docs/scaling.md, Kubernetes)
    kubernetes_yaml      the same as YAML: `python -m openenv_sdk.deploy ENV_DIR --image IMG | kubectl apply -f -`
"""

from openenv_sdk.deploy._kubernetes import kubernetes_objects, kubernetes_yaml

__all__ = ["kubernetes_objects", "kubernetes_yaml"]
