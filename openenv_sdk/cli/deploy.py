"""`openenv deploy ENV_DIR --image IMAGE`: print (or write) the Kubernetes objects for an image.

The objects come from `openenv_sdk.deploy.kubernetes_objects`: a Secret with a new orchestrator
token, a Deployment with the manifest's resources and `/health` probes, and a Service.
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
) -> None:
    """Print the Kubernetes objects (Secret, Deployment, Service) that run an environment image.

    The output holds the new orchestrator token: keep it secret.

    Examples:
        openenv deploy environments/echo --image registry.example/openenv-echo:0.1.0 | kubectl apply -f -
        openenv deploy environments/echo --image openenv-echo:0.1.0 --replicas 8 --namespace rl -o echo.yaml
    """
    from openenv_sdk.deploy import kubernetes_yaml

    try:
        text = kubernetes_yaml(env_dir, image=image, replicas=replicas, name=name, namespace=namespace)
    except (ValueError, ManifestError) as e:
        fail(str(e), hint="Example: openenv deploy environments/echo --image openenv-echo:0.1.0", code=2)
        return
    if output is None:
        sys.stdout.write(text)
        return
    output.touch(mode=0o600)
    output.chmod(0o600)
    output.write_text(text, encoding="utf-8")
