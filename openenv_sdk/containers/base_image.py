"""A base image for generated Dockerfiles, made locally where no registry can be reached.

`openenv build` generates Dockerfiles `FROM python:3.11-slim`. Where that image is neither in
the engine nor pullable (an offline machine, a registry that is blocked), the build uses the
local base `localhost/openenv-base:bookworm` instead, and makes it first when it is missing:
Debian bookworm's minimal root filesystem (`debootstrap`, from a Debian mirror, not a registry)
with Python 3.11, imported into the engine. That needs root and `debootstrap`; elsewhere the
error says which base image to pull or name (`--base-image`, `$OPENENV_BASE_IMAGE`).

`scripts/setup_container_engine.sh` makes the same image (same version label and packages:
`tests/containers/test_base_image.py` holds the two together).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from openenv_sdk.containers.errors import BuildError

if TYPE_CHECKING:
    import docker

__all__ = [
    "BASE_PACKAGES",
    "BASE_VERSION",
    "DEBIAN_MIRROR_ENV",
    "LABEL_BASE_VERSION",
    "LOCAL_BASE_IMAGE",
    "build_local_base",
    "has_image",
    "local_base_ready",
    "try_pull",
]

LOCAL_BASE_IMAGE = "localhost/openenv-base:bookworm"
BASE_VERSION = "2"
"""Bumped when `BASE_PACKAGES` changes: an older local base is then made again."""
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "git", "procps")
LABEL_BASE_VERSION = "org.openenv.base-version"
DEBIAN_MIRROR_ENV = "OPENENV_DEBIAN_MIRROR"
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEFAULT_BASE_BUILD_TIMEOUT_S = 900.0


def has_image(client: docker.DockerClient, name: str) -> bool:
    """Whether the engine holds `name` already (no pull)."""
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def try_pull(client: docker.DockerClient, name: str) -> str | None:
    """Pull `name`; `None` when it worked, else why not (one line)."""
    import docker.errors

    repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
    try:
        client.images.pull(repository, tag=tag or "latest")
    except docker.errors.DockerException as e:
        return " ".join(str(e).split())[:300]
    return None


def local_base_ready(client: docker.DockerClient, tag: str = LOCAL_BASE_IMAGE) -> bool:
    """Whether the engine holds the local base at the current `BASE_VERSION`."""
    import docker.errors

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(LABEL_BASE_VERSION) == BASE_VERSION


def build_local_base(
    client: docker.DockerClient,
    *,
    tag: str = LOCAL_BASE_IMAGE,
    mirror: str | None = None,
    timeout_s: float = DEFAULT_BASE_BUILD_TIMEOUT_S,
) -> str:
    """Make the local base image (debootstrap of Debian bookworm, imported into the engine); return `tag`.

    Args:
        client: a connected docker SDK client.
        tag: the image's name.
        mirror: the Debian mirror (default `$OPENENV_DEBIAN_MIRROR`, else deb.debian.org).
        timeout_s: the longest debootstrap may take, in seconds.

    Raises:
        BuildError: not root, no `debootstrap`, or it failed (with its log's tail).
    """
    missing = [why for why, bad in (("root", os.geteuid() != 0), ("debootstrap", shutil.which("debootstrap") is None)) if bad]
    if missing:
        raise BuildError(
            f"cannot make the local base image {tag}: it needs {' and '.join(missing)} "
            "(debootstrap of Debian bookworm)\nhint: pull a Python 3.11 base image, or name one with "
            "--base-image / $OPENENV_BASE_IMAGE",
            tag=tag,
            log_tail=[],
        )
    mirror = mirror or os.environ.get(DEBIAN_MIRROR_ENV) or DEFAULT_DEBIAN_MIRROR
    with tempfile.TemporaryDirectory(prefix="openenv-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        try:
            subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "bookworm", str(rootfs), mirror],
                capture_output=True, text=True, timeout=timeout_s, check=True,
            )
        except subprocess.CalledProcessError as e:
            tail = (e.stdout + e.stderr).splitlines()[-20:]
            raise BuildError(f"debootstrap of the local base image failed (mirror {mirror})\nhint: set "
                             f"${DEBIAN_MIRROR_ENV} to a reachable Debian mirror", tag=tag, log_tail=tail) from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"debootstrap of the local base image took more than {timeout_s:.0f} s", tag=tag,
                             log_tail=[]) from None
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        archive = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True, timeout=timeout_s)
        # Podman's Docker API names an import `<repository>:latest` whatever tag is asked: import
        # under a name of its own, then give the image its tag and drop that name.
        staging = f"localhost/openenv-import-{uuid.uuid4().hex[:12]}"
        client.api.import_image(
            src=str(archive), repository=staging, tag="latest",
            changes=['CMD ["/bin/bash"]', "ENV LANG=C.UTF-8", f"LABEL {LABEL_BASE_VERSION}={BASE_VERSION}"],
        )
    repository, _, image_tag = tag.rpartition(":")
    client.images.get(f"{staging}:latest").tag(repository, image_tag)
    client.images.remove(f"{staging}:latest")  # the staging name only: the image keeps `tag`
    return tag
