"""`python -m openenv_sdk.deploy ENV_DIR --image IMAGE [--replicas N] [--name NAME] [--namespace NS]`:
print the Kubernetes objects for an environment image (the Secret holds a new orchestrator token)."""

from __future__ import annotations

import argparse
import sys

from openenv_sdk.deploy._kubernetes import kubernetes_yaml


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openenv_sdk.deploy", description=__doc__.splitlines()[1])
    parser.add_argument("env_dir")
    parser.add_argument("--image", required=True)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--name")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args(argv)
    sys.stdout.write(
        kubernetes_yaml(args.env_dir, image=args.image, replicas=args.replicas, name=args.name, namespace=args.namespace)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
