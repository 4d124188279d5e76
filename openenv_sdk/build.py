"""Build an environment folder into a container image.

An environment folder has an `openenv.yaml` (at least `name`, `port`, and `environment` or
`app`). A `Dockerfile` in the folder (or in `server/`, OpenEnv's layout) is used as is;
otherwise one is generated (see `openenv_sdk.containers.dockerfile`) on a base image chosen by,
in order: the `base_image` argument, `$OPENENV_BASE_IMAGE`, the manifest's `base_image`,
then `python:3.11-slim`. Where that default can be neither found in the engine nor pulled
(offline), the build says so and uses the local base `localhost/openenv-base:bookworm`, made
first with debootstrap when missing (`openenv_sdk.containers.base_image`).

Example:
    >>> tag = build_image("environments/echo")  # doctest: +SKIP
    >>> tag
    'openenv-echo_env:latest'
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from rich.console import Console

from openenv_sdk.containers.base_image import LOCAL_BASE_IMAGE, build_local_base, has_image, local_base_ready, try_pull
from openenv_sdk.containers.buildlog import BuildOutput, run_build
from openenv_sdk.containers.context import assemble_context
from openenv_sdk.containers.dockerfile import DEFAULT_BASE_IMAGE, SANDBOX_PACKAGES, DockerfileSpec, render_dockerfile
from openenv_sdk.containers.engine import connect_engine
from openenv_sdk.containers.errors import BuildError
from openenv_sdk.containers.labels import image_labels
from openenv_sdk.containers.wheels import dependency_wheels, sdk_wheel, wheel_requirements
from openenv_sdk.errors import ManifestError
from openenv_sdk.manifest import MANIFEST_FILENAME, Manifest, load_manifest

if TYPE_CHECKING:
    import docker

__all__ = [
    "BASE_IMAGE_ENV",
    "BUILD_LABELS_ENV",
    "DEFAULT_BUILD_TIMEOUT_S",
    "build_image",
    "default_tag",
    "find_dockerfile",
    "resolve_base_image",
]

BASE_IMAGE_ENV = "OPENENV_BASE_IMAGE"
BUILD_LABELS_ENV = "OPENENV_BUILD_LABELS"
"""More labels for every image built, `KEY=VALUE,KEY=VALUE` (e.g. a CI run's id, to remove its images after)."""
DEFAULT_BUILD_TIMEOUT_S = 1800.0
_SDK_NAMES = {"openenv-sdk", "openenv_sdk"}


def build_image(
    env_dir: str | Path,
    *,
    tag: str | None = None,
    base_image: str | None = None,
    engine: docker.DockerClient | None = None,
    docker_host: str | None = None,
    output: BuildOutput = "progress",
    no_cache: bool = False,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
    console: Console | None = None,
    sdk_wheel_path: Path | None = None,
) -> str:
    """Build the image of an environment folder and return its tag.

    Args:
        env_dir: the environment folder (holding `openenv.yaml`).
        tag: image tag; default `openenv-<name>:latest`.
        base_image: base image of a generated Dockerfile (see the module docstring for the
            order of precedence). Ignored when the folder has its own Dockerfile.
        engine: a connected docker SDK client; default `connect_engine(docker_host=...)`.
        docker_host: engine address when `engine` is not given.
        output: `progress` (step lines), `full` (every log line) or `quiet`.
        no_cache: rebuild every layer.
        timeout_s: longest the whole build may take, in seconds.
        console: where progress goes (default: a rich console on stderr).
        sdk_wheel_path: an openenv-sdk wheel to install instead of one built from this
            checkout (or downloaded, when the SDK is not run from a checkout).

    Raises:
        ManifestError: the folder has no valid `openenv.yaml`, or it names no server to run.
        EngineUnavailableError: no container engine answers.
        BuildError: preparing wheels or a build step failed (the message has the log's tail), or
            `$OPENENV_BUILD_LABELS` is malformed.
    """
    folder = Path(env_dir).resolve()
    if not folder.is_dir():
        raise ManifestError(f"{folder}: not a folder (expected an environment folder with {MANIFEST_FILENAME})")
    manifest = load_manifest(folder)
    raw = yaml.safe_load((folder / MANIFEST_FILENAME).read_text(encoding="utf-8"))
    image_tag = tag or default_tag(manifest.name)
    out = console or _stderr_console()
    custom = find_dockerfile(folder)
    if custom is None:
        _check_server_entry(manifest)
    labels = image_labels(raw, manifest, sdk_version=_sdk_version())
    try:
        extra_labels = build_labels_from_env()
    except ValueError as e:
        raise BuildError(str(e), tag=image_tag, log_tail=[]) from None
    client = engine or connect_engine(docker_host=docker_host)
    try:
        if custom is not None:
            if output != "quiet":
                out.print(f"building {image_tag} from {custom}", markup=False, highlight=False)
            run_build(
                client,
                context_dir=folder,
                dockerfile=str(custom.relative_to(folder)),
                tag=image_tag,
                labels={**labels, **extra_labels},
                no_cache=no_cache,
                output=output,
                timeout_s=timeout_s,
                console=out,
            )
        else:
            _build_generated(
                client,
                folder,
                manifest,
                labels,
                extra_labels=extra_labels,
                base_image=_usable_base(client, base_image, manifest, output=output, console=out),
                tag=image_tag,
                sdk_wheel_path=sdk_wheel_path,
                no_cache=no_cache,
                output=output,
                timeout_s=timeout_s,
                console=out,
            )
    finally:
        if engine is None:
            client.close()
    return image_tag


def _build_generated(
    client: docker.DockerClient,
    folder: Path,
    manifest: Manifest,
    labels: dict[str, str],
    *,
    extra_labels: dict[str, str],
    base_image: str,
    tag: str,
    sdk_wheel_path: Path | None,
    no_cache: bool,
    output: BuildOutput,
    timeout_s: float,
    console: Console,
) -> None:
    if output != "quiet":
        console.print(f"building {tag} from {folder} on {base_image} (generated Dockerfile)", markup=False, highlight=False)
    with console.status("preparing wheels on the host", spinner="dots"):
        sdk = sdk_wheel_path or sdk_wheel(timeout_s=timeout_s)
        deps = dependency_wheels(
            wheel_requirements(sdk) + _environment_requirements(folder, manifest), timeout_s=timeout_s
        )
    sandbox = manifest.sandbox
    spec = DockerfileSpec(
        base_image=base_image,
        port=manifest.port,
        labels=labels,
        sandbox_user=sandbox.user if sandbox else None,
        # bubblewrap for the per-session sandboxes, then the environment's own packages
        system_packages=list(dict.fromkeys([*SANDBOX_PACKAGES, *sandbox.system_packages])) if sandbox else [],
    )
    dockerfile = render_dockerfile(spec)
    with tempfile.TemporaryDirectory(prefix="openenv-build-") as tmp:
        context = Path(tmp)
        assemble_context(
            context, env_dir=folder, dockerfile=dockerfile, sdk_wheel=sdk, deps_dir=deps, hidden=manifest.host_only_paths()
        )
        try:
            run_build(
                client,
                context_dir=context,
                dockerfile="Dockerfile",
                tag=tag,
                labels=extra_labels,  # given to the engine, not in the Dockerfile: the layers stay cached
                # Only a base image missing the environment's system packages (bubblewrap included,
                # for a sandboxed environment) needs the network: apt runs only for missing ones.
                network_mode=None if spec.system_packages else "none",
                no_cache=no_cache,
                output=output,
                timeout_s=timeout_s,
                console=console,
            )
        except BuildError as e:
            raise BuildError(_with_hint(str(e), e.log_tail, base_image), tag=e.tag, log_tail=e.log_tail) from e


def build_labels_from_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The labels `$OPENENV_BUILD_LABELS` asks for (`KEY=VALUE,KEY=VALUE`).

    Raises:
        ValueError: an item is not KEY=VALUE.
    """
    raw = (os.environ if environ is None else environ).get(BUILD_LABELS_ENV, "")
    labels = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"${BUILD_LABELS_ENV}: {item!r} is not KEY=VALUE (items are separated by commas)")
        labels[key.strip()] = value.strip()
    return labels


def _stderr_console() -> Console:
    out = Console(stderr=True, highlight=False)
    out.soft_wrap = not out.is_terminal  # a log file or a pipe keeps whole lines
    return out


def default_tag(name: str) -> str:
    """`openenv-<name>:latest`, with `name` made a valid image repository name."""
    repo = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("._-") or "env"
    return f"openenv-{repo}:latest"


def resolve_base_image(argument: str | None, manifest: Manifest | None = None) -> str:
    """The base image: `argument`, else `$OPENENV_BASE_IMAGE`, else the manifest's, else the default."""
    for candidate in (argument, os.environ.get(BASE_IMAGE_ENV), manifest.base_image if manifest else None):
        if candidate and candidate.strip():
            return candidate.strip()
    return DEFAULT_BASE_IMAGE


def _usable_base(
    client: docker.DockerClient, argument: str | None, manifest: Manifest, *, output: BuildOutput, console: Console
) -> str:
    """The base image to build on. One that was named (argument, `$OPENENV_BASE_IMAGE`, the
    manifest) is used as it is. The default, where the engine neither has it nor can pull it
    (offline), gives way to the local base image, made first if missing, saying so."""
    base = resolve_base_image(argument, manifest)
    if base != DEFAULT_BASE_IMAGE or has_image(client, base):
        return base
    why = try_pull(client, base)
    if why is None:
        return base
    say = (lambda text: None) if output == "quiet" else (lambda text: console.print(text, markup=False, highlight=False))
    if local_base_ready(client):
        say(f"{base} cannot be pulled ({why}); building on the local base image {LOCAL_BASE_IMAGE}")
    else:
        say(f"{base} cannot be pulled ({why}); making the local base image {LOCAL_BASE_IMAGE} "
            "from Debian bookworm with debootstrap (once; a minute or two)")
        build_local_base(client)
    return LOCAL_BASE_IMAGE


def find_dockerfile(env_dir: Path) -> Path | None:
    """The folder's own Dockerfile (`Dockerfile`, else `server/Dockerfile`), or `None`."""
    for candidate in (env_dir / "Dockerfile", env_dir / "server" / "Dockerfile"):
        if candidate.is_file():
            return candidate
    return None


def _check_server_entry(manifest: Manifest) -> None:
    if manifest.environment is None and manifest.app is None:
        where = manifest.source or MANIFEST_FILENAME
        raise ManifestError(
            f"{where}: the image needs a server to run: set `environment: module:Class` "
            "(or OpenEnv's `app: module:app`), or put a Dockerfile in the folder"
        )


def _environment_requirements(folder: Path, manifest: Manifest) -> list[str]:
    requirements = list(manifest.dependencies)
    req_file = folder / "requirements.txt"
    if req_file.is_file():
        for line in req_file.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                requirements.append(line)
    return [r for r in requirements if re.split(r"[\s<>=!~\[;@]", r, maxsplit=1)[0].lower() not in _SDK_NAMES]


def _sdk_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openenv-sdk")
    except PackageNotFoundError:
        return "0+checkout"


def _with_hint(message: str, log_tail: list[str], base: str) -> str:
    lowered = "\n".join(
        line for line in log_tail[-6:] if not line.lstrip().upper().startswith(("STEP", "FROM"))
    ).lower()
    if any(word in lowered for word in ("pull", "manifest unknown", "name unknown", "initializing source")):
        return (
            f"{message}\nhint: the base image {base!r} is not available to the engine; build or pull it, "
            f"or choose another with base_image=... or ${BASE_IMAGE_ENV}"
        )
    if "no matching distribution" in lowered:
        return (
            f"{message}\nhint: the wheels were prepared for the host's Python; the base image's Python "
            "must have the same minor version"
        )
    return message
