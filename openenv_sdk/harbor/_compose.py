"""A Harbor task's `environment/docker-compose.yaml`, read as far as a task with its own image goes.

Terminal-Bench 2 ships a compose file beside a task's Dockerfile to give its main container
settings (its build, environment, working directory, Harbor's log mounts, resource limits) and,
in a few tasks, services beside it. The file is parsed with PyYAML (`safe_load`) into pydantic
models of the subset below (`extra="forbid"`): a key outside it is refused by name
(`HarborComposeError`), never silently dropped. The Compose projects' own parsers are Go
(compose-go) or CLI programs (docker compose, podman-compose); none is a library to call here.

    services.<main>            the service named `main` (Harbor's), else the only one
      build                    `.` or {context, dockerfile} inside environment/   -> the task's image
      image, container_name    ignored beside `build` (the image is built here)
      command, entrypoint      ignored: the image runs the terminal environment's server
      environment              fixed values: ENV of the task's image (what the agent's shell gets)
      working_dir              the workspace (over task.toml's and the Dockerfile's WORKDIR)
      volumes                  Harbor's log mounts (`${...}:...`) ignored; any other refused
      deploy, mem_limit, cpus, healthcheck, init, tty, stdin_open, networks, depends_on   ignored
    services.<other>           refused: the agent's sandbox has no network to reach a service by
    version, name, networks, x-*   ignored

Everything else (`privileged`, `cap_add`, `ports`, `network_mode`, `devices`, `user`, top-level
`volumes`/`secrets`/`configs`, ...) is refused with the keys named.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._errors import HarborComposeError

__all__ = ["COMPOSE_FILES", "ComposePlan", "find_compose", "read_compose"]

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IGNORED_SERVICE_KEYS = ("image", "container_name", "command", "entrypoint", "deploy", "mem_limit", "cpus",
                         "healthcheck", "init", "tty", "stdin_open", "networks", "depends_on")  # fmt: skip


class _Build(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context: str = "."
    dockerfile: str = "Dockerfile"


class _Service(BaseModel):
    model_config = ConfigDict(extra="forbid")

    build: str | _Build | None = None
    image: str | None = None
    container_name: str | None = None
    command: str | list[str] | None = None
    entrypoint: str | list[str] | None = None
    environment: dict[str, str | int | float | bool | None] | list[str] | None = None
    working_dir: str | None = None
    volumes: list[str] | None = None
    deploy: dict[str, Any] | None = None
    mem_limit: str | int | None = None
    cpus: str | float | None = None
    healthcheck: dict[str, Any] | None = None
    init: bool | None = None
    tty: bool | None = None
    stdin_open: bool | None = None
    networks: list[str] | dict[str, Any] | None = None
    depends_on: list[str] | dict[str, Any] | None = None


class _ComposeFile(BaseModel):
    model_config = ConfigDict(extra="allow")  # `x-*` extension fields; any other extra key is refused below

    version: str | float | None = None
    name: str | None = None
    services: dict[str, _Service] = Field(min_length=1)
    networks: dict[str, Any] | None = None


class ComposePlan(BaseModel):
    """What the compose file means for the task's image."""

    file: str = Field(description="Its name in environment/.")
    service: str = Field(description="The main service's name.")
    context: str = Field(default=".", description="The build context, relative to environment/.")
    dockerfile: str = Field(default="Dockerfile", description="The Dockerfile, relative to the context.")
    environment: dict[str, str] = Field(default_factory=dict, description="ENV of the task's image.")
    working_dir: str | None = None
    notes: list[str] = Field(default_factory=list)


def find_compose(environment_dir: Path) -> Path | None:
    """The task's compose file, if it has one."""
    return next((environment_dir / n for n in COMPOSE_FILES if (environment_dir / n).is_file()), None)


def read_compose(path: Path, *, source: Path) -> ComposePlan:
    """Parse `path` (a task's compose file) into the main service's settings.

    Raises:
        HarborComposeError: the file does not parse, or uses keys or services outside the subset
            (every one named in `keys`).
    """
    where = path.name
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise HarborComposeError(source, [], [f"environment/{where} does not parse: {e}"]) from e
    if not isinstance(raw, dict):
        raise HarborComposeError(source, [], [f"environment/{where}: not a mapping with `services:`"])
    unknown = [str(k) for k in raw if not str(k).startswith("x-") and k not in _ComposeFile.model_fields]
    try:
        compose = _ComposeFile.model_validate(raw)
    except ValidationError as e:
        unknown += [_key(err["loc"]) for err in e.errors() if err["type"] == "extra_forbidden"]
        # with an unknown key, the other errors are mostly the union's other branches failing
        other = [] if unknown else [f"{_key(err['loc'])}: {err['msg']}" for err in e.errors()]
        problems = _unknown_problems(where, unknown) + [f"environment/{where}: {o}" for o in other]
        raise HarborComposeError(source, unknown, problems) from e
    if unknown:
        raise HarborComposeError(source, unknown, _unknown_problems(where, unknown))
    name = "main" if "main" in compose.services else next(iter(compose.services))
    others = [n for n in compose.services if n != name]
    if others:
        raise HarborComposeError(
            source,
            [f"services.{n}" for n in others],
            [
                f"environment/{where}: services {', '.join(others)} beside the main one ({name}) are not supported: "
                f"the agent's commands run in a sandbox with no network, which could not reach them"
            ],
        )
    return _plan(where, name, compose.services[name], source)


def _key(loc: tuple[int | str, ...]) -> str:
    """A dotted key from a pydantic error location, without the union branches' tags (`_Build`, `str`)."""
    return ".".join(str(p) for p in loc if not re.fullmatch(r"_\w+|str|int|float|bool|(list|dict)\[.*\]", str(p)))


def _unknown_problems(where: str, keys: list[str]) -> list[str]:
    return [f"environment/{where}: {key} is not supported (docs/harbor.md, Compose files)" for key in keys]


def _plan(where: str, name: str, service: _Service, source: Path) -> ComposePlan:
    plan = ComposePlan(file=where, service=name)
    problems: list[str] = []
    bad_keys: list[str] = []
    build = service.build
    if build is None:
        plan.notes.append(f"{where}: services.{name} has no build: environment/Dockerfile is built")
    else:
        context, dockerfile = (build, "Dockerfile") if isinstance(build, str) else (build.context, build.dockerfile)
        if re.fullmatch(r"\$\{?CONTEXT_DIR\}?", context):  # Harbor's own: the task's environment/
            plan.notes.append(f"{where}: services.{name}.build.context {context} read as environment/")
            context = "."
        for label, value in (("build.context", context), ("build.dockerfile", dockerfile)):
            normal = posixpath.normpath(value)
            if value.startswith("/") or normal == ".." or normal.startswith("../") or "$" in value:
                problems.append(f"environment/{where}: services.{name}.{label} {value!r} must stay inside environment/")
                bad_keys.append(f"services.{name}.{label}")
        plan.context, plan.dockerfile = posixpath.normpath(context), posixpath.normpath(dockerfile)
    for key, value in _environment(service.environment).items():
        if not _ENV_NAME.match(key) or "$" in value or "\n" in value:
            problems.append(
                f"environment/{where}: services.{name}.environment {key}: only fixed one-line values map "
                f"(a ${{VAR}} would read the building host's environment)"
            )
            bad_keys.append(f"services.{name}.environment.{key}")
        else:
            plan.environment[key] = value
    if service.working_dir is not None:
        plan.working_dir = posixpath.normpath(service.working_dir)
    for volume in service.volumes or []:
        if volume.startswith("${"):
            plan.notes.append(f"{where}: volume {volume} ignored (Harbor's log folders: the check has its own /logs)")
        else:
            problems.append(f"environment/{where}: volume {volume!r}: a host folder cannot be mounted into the task")
            bad_keys.append(f"services.{name}.volumes")
    ignored = [k for k in _IGNORED_SERVICE_KEYS if getattr(service, k) is not None and not (k == "image" and build is None)]
    if service.image is not None and build is None:
        problems.append(
            f"environment/{where}: services.{name}.image {service.image!r} without build: a prebuilt image is not "
            f"built here (give it a build, or a Dockerfile)"
        )
        bad_keys.append(f"services.{name}.image")
    if ignored:
        plan.notes.append(
            f"{where}: services.{name} {', '.join(ignored)} ignored: the image runs the terminal environment's "
            f"server, under the manifest's limits"
        )
    if problems:
        raise HarborComposeError(source, bad_keys, problems)
    return plan


def _environment(value: dict[str, Any] | list[str] | None) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        pairs = [item.split("=", 1) if "=" in item else [item, "$" + item] for item in value]
        return {k: v for k, v in pairs}
    return {str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
