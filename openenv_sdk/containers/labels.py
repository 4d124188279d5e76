"""Image labels that carry an environment's manifest, and reading them back.

A built image is self-describing: `org.openenv.manifest` holds the environment's
`openenv.yaml` as JSON, so a provider knows the port, limits and network policy of an
image without its source folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from openenv_sdk.manifest import Manifest

__all__ = [
    "LABEL_IMAGE",
    "LABEL_MANAGED",
    "LABEL_MANIFEST",
    "LABEL_NAME",
    "LABEL_OWNER_PID",
    "LABEL_PORT",
    "LABEL_SDK_VERSION",
    "LABEL_VERSION",
    "image_labels",
    "manifest_from_labels",
]

LABEL_MANIFEST = "org.openenv.manifest"
LABEL_NAME = "org.openenv.name"
LABEL_VERSION = "org.openenv.version"
LABEL_PORT = "org.openenv.port"
LABEL_SDK_VERSION = "org.openenv.sdk-version"
LABEL_MANAGED = "org.openenv.managed"  # on containers started by a provider
LABEL_OWNER_PID = "org.openenv.owner-pid"  # on containers started by a provider: the process that started it
LABEL_IMAGE = "org.openenv.image"  # on containers started by a provider: the image as it was asked for


def image_labels(manifest_data: Mapping[str, Any], manifest: Manifest, *, sdk_version: str) -> dict[str, str]:
    """The labels of an environment's image.

    Args:
        manifest_data: the manifest as read from YAML (kept verbatim, as JSON).
        manifest: the same manifest, validated.
        sdk_version: the version of openenv-sdk installed in the image.
    """
    labels = {
        LABEL_NAME: manifest.name,
        LABEL_PORT: str(manifest.port),
        LABEL_SDK_VERSION: sdk_version,
        LABEL_MANIFEST: json.dumps(manifest_data, sort_keys=True, separators=(",", ":"), default=str),
    }
    if manifest.version:
        labels[LABEL_VERSION] = manifest.version
    return labels


def manifest_from_labels(labels: Mapping[str, str] | None) -> Manifest | None:
    """The manifest an image carries, or `None` when it has no (valid) manifest label."""
    raw = (labels or {}).get(LABEL_MANIFEST)
    if not raw:
        return None
    try:
        return Manifest.model_validate(json.loads(raw))
    except ValueError:  # json.JSONDecodeError and pydantic.ValidationError both are
        return None
