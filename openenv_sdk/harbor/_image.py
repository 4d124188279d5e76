"""Harbor tasks that bring their own image: the task's Dockerfile (and compose file), built on the
terminal environment's server image.

    tasks/<id>/environment/     the Harbor task's environment/, copied by the importer
    tasks/<id>/task.yaml        `image: true`, `workdir`

`build_task_image(env_dir, task_id)` builds the environment's server image (`openenv build`'s,
on a local base such as `$OPENENV_BASE_IMAGE`), then the task's Dockerfile with its `FROM`
replaced by that image (the task's base image is not pulled: nothing is, offline), and a
trailer that gives the image back to the server:

    ENV OPENENV_TERMINAL_TASK_IMAGE=<id> OPENENV_TERMINAL_TASK_ENV=<the task's ENV names>
    USER / WORKDIR / ENTRYPOINT / CMD    as the server image had them

So the task's `RUN` lines run at build, as root, as Docker runs them (files anywhere, tools
installed into the system), and the agent's commands then run in that system: the terminal
environment's server in the image gives every command the same sandbox as anywhere else (a uid
of its own, namespaces, no network but the agent's model endpoint), with the workspace a copy of
the image's `workdir`. The checks come from `hidden/` on the host, as for every terminal task:
they never enter the image.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, Field

from ..terminal_task import TASK_ENV_NAMES, TASK_IMAGE_ENV, TerminalTaskSpec
from ._compose import ComposePlan, find_compose, read_compose
from ._dockerfile import _WORKDIR, FORBIDDEN_WORKDIRS, _env_names, _inside, _instructions
from ._errors import HarborImportError

if TYPE_CHECKING:
    import docker

__all__ = ["LABEL_TASK", "ImagePlan", "build_task_image", "plan_image", "task_dockerfile"]

LABEL_TASK = "org.openenv.harbor.task"
"""Image label: the terminal task id an image was built for."""
BUILD_DOCKERFILE = "Dockerfile.openenv"
DEFAULT_BUILD_TIMEOUT_S = 600.0


class ImagePlan(BaseModel):
    """A task's own image: what to build, and where its workspace is."""

    dockerfile: str = Field(default="Dockerfile", description="Relative to environment/.")
    context: str = Field(default=".", description="The build context, relative to environment/.")
    workdir: str | None = None
    environment: dict[str, str] = Field(default_factory=dict, description="ENV from the compose file.")
    env_names: list[str] = Field(default_factory=list, description="Every ENV the task's image sets.")
    compose: ComposePlan | None = None
    notes: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


def plan_image(environment_dir: Path, *, source: Path, workdir: str | None = None) -> ImagePlan:
    """Read the task's compose file (if any) and Dockerfile for a build of its own image.

    Args:
        environment_dir: the task's `environment/`.
        source: the task folder (named in errors).
        workdir: `task.toml`'s `[environment] workdir`; the compose file's `working_dir`, then the
            Dockerfile's last `WORKDIR`, come after it.

    Raises:
        HarborComposeError: the compose file uses what is not supported (every key named).
    """
    plan = ImagePlan()
    compose_file = find_compose(environment_dir)
    if compose_file is not None:
        plan.compose = read_compose(compose_file, source=source)
        plan.context, plan.environment = plan.compose.context, plan.compose.environment
        plan.dockerfile = posixpath.normpath(posixpath.join(plan.context, plan.compose.dockerfile))
        plan.notes += plan.compose.notes
    dockerfile = environment_dir / plan.dockerfile
    if not dockerfile.is_file():
        plan.problems.append(f"environment/{plan.dockerfile} is missing: the task's image has nothing to build")
        return plan
    steps = _instructions(dockerfile.read_text(encoding="utf-8", errors="replace"))
    froms = [line for line, keyword, _ in steps if keyword == "FROM"]
    if len(froms) != 1:
        plan.problems.append(
            f"environment/{plan.dockerfile}: {len(froms)} FROM lines; one stage is built (its FROM replaced by the "
            f"environment's server image)"
        )
    cwd, last = "/", None
    for line, keyword, args in steps:
        if keyword == "WORKDIR":
            cwd = last = posixpath.normpath(posixpath.join(cwd, args.strip().strip('"')))
        elif keyword == "ENV":
            plan.env_names += [n for n in _env_names(args) if n not in plan.env_names]
        elif keyword in ("COPY", "ADD") and "--from" in args:
            plan.problems.append(f"environment/{plan.dockerfile} line {line}: {keyword} --from (a multi-stage build)")
    plan.env_names += [n for n in plan.environment if n not in plan.env_names]
    plan.workdir = workdir or (plan.compose.working_dir if plan.compose else None) or last
    if plan.workdir is None:
        plan.problems.append("no workdir (task.toml [environment] workdir, the compose working_dir or a WORKDIR): add WORKDIR /app")
    elif not _WORKDIR.match(plan.workdir) or plan.workdir == "/" or any(_inside(plan.workdir, d) for d in FORBIDDEN_WORKDIRS):
        plan.problems.append(
            f"workdir {plan.workdir!r}: the workspace is mounted there; use a folder of its own such as /app "
            f"(letters, digits, '.', '_', '-', '/')"
        )
    bad_env = [n for n in plan.env_names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    if bad_env:
        plan.problems.append(f"environment/{plan.dockerfile}: ENV names {bad_env} cannot be read")
    return plan


def task_dockerfile(text: str, *, server_image: str, server_config: dict[str, object], task_id: str, plan: ImagePlan) -> str:
    """The task's Dockerfile built on `server_image` (its one `FROM` replaced), with the trailer that
    gives the image back to the server (`server_config`: the server image's `Config`)."""
    lines, replaced, dropping = [], False, False
    for line in text.splitlines():
        if dropping or re.match(r"^\s*HEALTHCHECK\s", line, re.IGNORECASE):
            # the server image's health check (its /health) stays: the provider waits on it
            lines.append(f"# {line}  (dropped by openenv harbor build)")
            dropping = line.rstrip().endswith("\\")
        elif re.match(r"^\s*FROM\s", line, re.IGNORECASE) and not replaced:
            lines.append(f"# {line.strip()}  (replaced by openenv harbor build: the environment's server image)")
            lines.append(f"FROM {server_image}")
            replaced = True
        else:
            lines.append(line)
    env = {**plan.environment, TASK_IMAGE_ENV: task_id, TASK_ENV_NAMES: ",".join(plan.env_names)}
    user = str(server_config.get("User") or "root")
    entrypoint = server_config.get("Entrypoint") or []
    trailer = [
        "",
        "# --- added by openenv harbor build: the image runs the terminal environment's server",
        "ENV " + " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in env.items()),
        f"USER {user}",
        f"WORKDIR {server_config.get('WorkingDir') or '/'}",
        f"ENTRYPOINT {json.dumps(entrypoint)}",
        f"CMD {json.dumps(server_config.get('Cmd') or [])}",
    ]
    return "\n".join(lines + trailer) + "\n"


def build_task_image(
    env_dir: str | Path,
    task_id: str,
    *,
    tag: str | None = None,
    server_tag: str | None = None,
    base_image: str | None = None,
    labels: dict[str, str] | None = None,
    engine: docker.DockerClient | None = None,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
) -> str:
    """Build the image of `task_id` (a task with `image: true` in `env_dir`) and return its tag.

    Args:
        env_dir: the environment folder (the terminal environment, or a copy with its tasks).
        task_id: the task, under `env_dir/tasks/`.
        tag: the task image's tag; default `<server image>-<task_id>`.
        server_tag: the environment's server image (built first, layers cached); default
            `openenv build`'s tag.
        base_image: the server image's base (default `$OPENENV_BASE_IMAGE`, as `openenv build`).
        labels: more labels for the task image (`LABEL_TASK` is always set).
        engine: a connected docker SDK client; default `connect_engine()`.
        timeout_s: the longest each of the two builds may take.

    Raises:
        HarborImportError: the task is not one with its own image, or its files say it cannot be built.
        HarborComposeError: its compose file uses what is not supported.
        BuildError: a build failed (the message ends with the log's tail).
    """
    from openenv_sdk.build import build_image, default_tag
    from openenv_sdk.containers.buildlog import run_build
    from openenv_sdk.containers.engine import connect_engine
    from openenv_sdk.manifest import load_manifest

    folder = Path(env_dir).resolve()
    task_folder = folder / "tasks" / task_id
    spec_path = task_folder / "task.yaml"
    if not spec_path.is_file():
        raise HarborImportError(task_folder, [f"{spec_path} does not exist"])
    spec = TerminalTaskSpec.model_validate(yaml.safe_load(spec_path.read_text(encoding="utf-8")))
    environment_dir = task_folder / "environment"
    if not spec.image or not environment_dir.is_dir():
        raise HarborImportError(task_folder, ["not a task with its own image (task.yaml image: true and environment/)"])
    plan = plan_image(environment_dir, source=task_folder, workdir=spec.workdir)
    if plan.problems:
        raise HarborImportError(task_folder, plan.problems)
    client = engine or connect_engine()
    try:
        server = build_image(
            folder, tag=server_tag or default_tag(load_manifest(folder).name),
            base_image=base_image or os.environ.get("OPENENV_BASE_IMAGE") or None,
            engine=client, output="quiet", timeout_s=timeout_s,
        )  # fmt: skip
        config = client.images.get(server).attrs.get("Config") or {}
        image_tag = tag or f"{server.rsplit(':', 1)[0]}-{task_id}:latest"
        text = (environment_dir / plan.dockerfile).read_text(encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="openenv-harbor-build-") as tmp:
            context = Path(tmp) / "context"
            shutil.copytree(environment_dir / plan.context, context, symlinks=True)
            (context / BUILD_DOCKERFILE).write_text(
                task_dockerfile(text, server_image=server, server_config=config, task_id=task_id, plan=plan),
                encoding="utf-8",
            )
            run_build(
                client, context_dir=context, dockerfile=BUILD_DOCKERFILE, tag=image_tag,
                labels={**(labels or {}), LABEL_TASK: task_id}, output="quiet", timeout_s=timeout_s,
            )  # fmt: skip
    finally:
        if engine is None:
            client.close()
    return image_tag
