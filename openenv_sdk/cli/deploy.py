"""`openenv deploy ENV_DIR --image IMAGE`: print (or write) the Kubernetes objects for an image.

The objects come from `openenv_sdk.deploy.kubernetes_objects`: a Secret with a new orchestrator
token, a locked-down Deployment with the manifest's resources and `/health` probes (what
bubblewrap needs, for a sandboxed environment), a Service and a default-deny NetworkPolicy.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ManifestError
from ._output import fail

__all__ = ["deploy"]


def deploy(
    env_dir: Annotated[Path, typer.Argument(help="The environment folder (holds openenv.yaml).", show_default=False)],
    image: Annotated[str, typer.Option("--image", help="The environment image (openenv build).", show_default=False)],
    replicas: Annotated[int, typer.Option("--replicas", help="How many pods (servers).")] = 1,
    name: Annotated[str | None, typer.Option("--name", help="The objects' name; default the manifest's.")] = None,
    namespace: Annotated[str, typer.Option("--namespace", help="The namespace of every object.")] = "default",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the YAML here (mode 600) instead of stdout.")
    ] = None,
    allow_from_namespace: Annotated[
        list[str] | None,
        typer.Option("--allow-from-namespace", help="KEY=VALUE: a label of the namespaces whose pods may connect (repeatable; default: this namespace)."),
    ] = None,
    allow_from_pod: Annotated[
        list[str] | None,
        typer.Option("--allow-from-pod", help="KEY=VALUE: a label of the pods that may connect (repeatable; default openenv.io/client=true)."),
    ] = None,
    apparmor: Annotated[
        str | None,
        typer.Option("--apparmor", help="unconfined, runtime/default or localhost/NAME (default: unconfined when sandboxed).", show_default=False),
    ] = None,
    user_namespace: Annotated[
        bool, typer.Option("--user-namespace", help="Run a sandboxed environment's pods in their own user namespace (hostUsers: false).")
    ] = False,
) -> None:
    """Print the Kubernetes objects (Secret, Deployment, Service, NetworkPolicy) that run an environment image.

    The output holds the new orchestrator token: keep it secret. Only pods labelled
    openenv.io/client=true in the namespace (or what --allow-from-* selects) reach the server.

    Examples:
        openenv deploy environments/echo --image registry.example/openenv-echo:0.1.0 | kubectl apply -f -
        openenv deploy environments/echo --image openenv-echo:0.1.0 --replicas 8 --namespace rl -o echo.yaml
        openenv deploy environments/terminal --image openenv-terminal:0.1.0 --namespace rl --allow-from-pod app=trainer
    """
    from openenv_sdk.deploy import kubernetes_yaml

    try:
        text = kubernetes_yaml(
            env_dir,
            image=image,
            replicas=replicas,
            name=name,
            namespace=namespace,
            ingress_namespaces=_labels(allow_from_namespace, "--allow-from-namespace"),
            ingress_pods=_labels(allow_from_pod, "--allow-from-pod"),
            apparmor=apparmor,
            user_namespace=user_namespace,
        )
    except (ValueError, ManifestError) as e:
        fail(str(e), hint="Example: openenv deploy environments/echo --image openenv-echo:0.1.0", code=2)
        return
    if output is None:
        sys.stdout.write(text)
        return
    output.touch(mode=0o600)
    output.chmod(0o600)
    output.write_text(text, encoding="utf-8")


def _labels(pairs: list[str] | None, option: str) -> dict[str, str] | None:
    """`KEY=VALUE` options as labels; None when none were given.

    Raises:
        ValueError: an entry without `=` or with an empty key.
    """
    if not pairs:
        return None
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} takes KEY=VALUE (a label), got {pair!r}")
        labels[key] = value
    return labels
