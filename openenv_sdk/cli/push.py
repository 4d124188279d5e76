"""`openenv push PATH --repo-id ORG/NAME`: publish an environment as a Hugging Face Docker Space.

The Space folder is staged in a temporary directory, exactly as `openenv build` assembles its
build context (the generated Dockerfile at the root, the SDK's and dependencies' wheels, the
environment under `env/`), so the Space builds the same image with no package index. A folder
with its own Dockerfile is staged as it is. `README.md` gets the Space front matter.

Then, with `huggingface_hub`: `create_repo` (a docker Space), one `add_space_variable` per
manifest variable, one `add_space_secret` per `--secret KEY` (the value read from this
host's environment, never printed), and `upload_folder`.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.markup import escape

from ..errors import ManifestError, OpenEnvError
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, debug_enabled, fail, print_json

__all__ = ["PlannedCall", "PushError", "SpacePlan", "plan_calls", "push", "push_space", "space_readme", "stage_space"]

_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_SECRET_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FRONT_MATTER_RE = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n?", re.DOTALL)
_SPACE_PLATFORM = ("linux", "x86_64")
_REDACTED = "***"


class PushError(OpenEnvError):
    """The folder cannot be published as it is (the message says why and what to do)."""


class PlannedCall(BaseModel):
    """One `HfApi` call `push` makes. A secret's value is not held here: only its key."""

    model_config = ConfigDict(frozen=True)

    method: str = Field(description="The `HfApi` method, e.g. `create_repo`.")
    kwargs: dict[str, Any] = Field(description="Its keyword arguments (a secret's `value` is left out).")
    secret: str | None = Field(default=None, description="For `add_space_secret`: the key whose value is filled in.")

    def render(self) -> str:
        """The call as text, with a secret's value shown as `***`."""
        shown = dict(self.kwargs)
        if self.secret is not None:
            shown["value"] = _REDACTED
        args = ", ".join(f"{k}={v if v == _REDACTED else repr(v)}" for k, v in shown.items())
        return f"{self.method}({args})"


class SpacePlan(BaseModel):
    """What `push` stages and the calls it makes."""

    repo_id: str
    folder: Path = Field(description="The staged Space folder (temporary unless a stage folder was given).")
    files: list[str] = Field(description="The staged files, relative to `folder`, sorted.")
    calls: list[PlannedCall]

    @property
    def url(self) -> str:
        return f"https://huggingface.co/spaces/{self.repo_id}"


# --- staging --------------------------------------------------------------------------------


def space_readme(manifest: Any, readme: str | None) -> str:
    """README.md with the Space's front matter (`sdk: docker`, `app_port`, the `openenv` tag).

    Keys of an existing front matter are kept, except those the Space needs, which are set.
    """
    front: dict[str, Any] = {}
    body = readme or ""
    match = _FRONT_MATTER_RE.match(body)
    if match:
        loaded = yaml.safe_load(match.group(1))
        front = dict(loaded) if isinstance(loaded, dict) else {}
        body = body[match.end():]
    tags = [str(t) for t in front.get("tags") or []]
    front.setdefault("title", manifest.name)
    front.update({"sdk": "docker", "app_port": manifest.port, "tags": ["openenv", *(t for t in tags if t != "openenv")]})
    front.setdefault("pinned", False)
    if manifest.description and "short_description" not in front:
        front["short_description"] = _short(manifest.description)
    if not body.strip():
        body = f"# {manifest.name}\n\n{manifest.description or 'An openenv-sdk environment.'}\n"
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n{body.lstrip()}"


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= 60 else one[:57].rstrip() + "..."


def stage_space(env_dir: str | Path, dest: str | Path, *, base_image: str | None = None) -> list[str]:
    """Fill the empty folder `dest` with the Space for `env_dir`; return the files, relative and sorted.

    Raises:
        ManifestError: the folder's manifest is invalid or names nothing to serve.
        PushError: the wheels prepared here would not install in the Space (wrong platform or
            Python), or the base image cannot be pulled by the Space.
        BuildError: preparing the wheels failed.
    """
    from ..build import find_dockerfile
    from ..manifest import load_manifest

    folder = Path(env_dir).resolve()
    target = Path(dest)
    if not folder.is_dir():
        raise ManifestError(f"{folder}: not a folder (expected an environment folder with openenv.yaml)")
    manifest = load_manifest(folder)
    readme_file = folder / "README.md"
    readme = readme_file.read_text(encoding="utf-8") if readme_file.is_file() else None
    custom = find_dockerfile(folder)
    if custom is not None:
        from ..containers.context import ENV_COPY_IGNORE

        shutil.copytree(folder, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*ENV_COPY_IGNORE))
        if custom.parent != folder:  # OpenEnv's server/Dockerfile: its context is the folder's root
            shutil.copy2(custom, target / "Dockerfile")
    else:
        _stage_generated(folder, target, manifest, base_image)
    (target / "README.md").write_text(space_readme(manifest, readme), encoding="utf-8")
    return sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())


def _stage_generated(folder: Path, target: Path, manifest: Any, base_image: str | None) -> None:
    import json
    from importlib.metadata import PackageNotFoundError, version

    from ..build import (
        _check_server_entry,
        _environment_requirements,
        resolve_base_image,
    )
    from ..containers.context import assemble_context
    from ..containers.dockerfile import DockerfileSpec, render_dockerfile
    from ..containers.labels import image_labels
    from ..containers.wheels import dependency_wheels, sdk_wheel, wheel_requirements

    _check_server_entry(manifest)
    base = resolve_base_image(base_image, manifest)
    _check_space_platform(base)
    try:
        sdk_version = version("openenv-sdk")
    except PackageNotFoundError:
        sdk_version = "0+checkout"
    raw = yaml.safe_load((folder / "openenv.yaml").read_text(encoding="utf-8"))
    sdk = sdk_wheel()
    deps = dependency_wheels(wheel_requirements(sdk) + _environment_requirements(folder, manifest))
    labels = image_labels(json.loads(json.dumps(raw, default=str)), manifest, sdk_version=sdk_version)
    spec = DockerfileSpec(base_image=base, port=manifest.port, labels=labels)
    # hidden tests, reference solutions and the oracle stay on the host, as in `openenv build`
    assemble_context(
        target, env_dir=folder, dockerfile=render_dockerfile(spec), sdk_wheel=sdk, deps_dir=deps, hidden=manifest.host_only_paths()
    )


def _check_space_platform(base: str) -> None:
    host = (sys.platform, platform.machine().lower().replace("amd64", "x86_64"))
    if host != _SPACE_PLATFORM:
        raise PushError(
            f"Spaces build on linux/x86_64, but the wheels would be prepared for this host ({host[0]}/{host[1]}): "
            "run `openenv push` on linux x86_64 (e.g. in CI), or put your own Dockerfile in the folder"
        )
    if base.startswith("localhost/"):
        raise PushError(f"the base image {base!r} is local to this machine and the Space cannot pull it: "
                        "pass --base-image with a public image (or unset $OPENENV_BASE_IMAGE)")
    match = re.search(r"(?:^|/)python:(\d+)\.(\d+)", base)
    if match and (int(match.group(1)), int(match.group(2))) != sys.version_info[:2]:
        raise PushError(
            f"the base image {base!r} has Python {match.group(1)}.{match.group(2)} but the wheels are prepared for "
            f"this Python {sys.version_info[0]}.{sys.version_info[1]}: pass --base-image "
            f"python:{sys.version_info[0]}.{sys.version_info[1]}-slim, or run push with that Python"
        )


# --- the calls ------------------------------------------------------------------------------


def plan_calls(repo_id: str, folder: Path, *, private: bool, variables: Mapping[str, str],
               secret_keys: list[str], commit_message: str) -> list[PlannedCall]:
    """The `HfApi` calls that publish `folder` as the Space `repo_id`, in order."""
    calls = [PlannedCall(method="create_repo", kwargs={"repo_id": repo_id, "repo_type": "space",
                                                       "space_sdk": "docker", "private": private, "exist_ok": True})]
    calls += [PlannedCall(method="add_space_variable", kwargs={"repo_id": repo_id, "key": key, "value": value})
              for key, value in variables.items()]
    calls += [PlannedCall(method="add_space_secret", kwargs={"repo_id": repo_id, "key": key}, secret=key)
              for key in secret_keys]
    calls.append(PlannedCall(method="upload_folder", kwargs={"repo_id": repo_id, "repo_type": "space",
                                                             "folder_path": str(folder),
                                                             "commit_message": commit_message}))
    return calls


def push_space(
    env_dir: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    secrets: Mapping[str, str] | None = None,
    token: str | None = None,
    dry_run: bool = False,
    base_image: str | None = None,
    stage_dir: str | Path | None = None,
    api: Any = None,
    out: Console | None = None,
    on_plan: Callable[[SpacePlan], None] | None = None,
) -> SpacePlan:
    """Stage `env_dir` as a Docker Space and publish it as `repo_id` (or, with `dry_run`, only plan it).

    Args:
        env_dir: the environment folder.
        repo_id: `ORG/NAME` of the Space.
        private: create the Space private.
        secrets: Space secrets, key to value (values are never printed).
        token: Hugging Face token; default `huggingface_hub`'s (HF_TOKEN, or `hf auth login`).
        dry_run: stage and plan, make no call.
        base_image: base image of a generated Dockerfile.
        stage_dir: stage here (an empty or new folder, kept) instead of a temporary folder.
        api: the `HfApi` to call; default `HfApi(token=token)`.
        out: where progress lines go (default: the CLI's console).
        on_plan: called with the plan once the folder is staged, before any call is made.

    Raises:
        PushError: bad `repo_id`, or a folder that cannot be published (see `stage_space`).
        ManifestError, BuildError: see `stage_space`.
    """
    from ..manifest import load_manifest

    if not _REPO_ID_RE.match(repo_id):
        raise PushError(f"invalid --repo-id {repo_id!r}: expected ORG/NAME, e.g. my-org/echo")
    secrets = dict(secrets or {})
    out = out or console
    manifest = load_manifest(env_dir)
    with _staging(stage_dir) as folder:
        files = stage_space(env_dir, folder, base_image=base_image)
        message = f"openenv push: {manifest.name}" + (f" {manifest.version}" if manifest.version else "")
        plan = SpacePlan(repo_id=repo_id, folder=folder, files=files, calls=plan_calls(
            repo_id, folder, private=private, variables=manifest.variables, secret_keys=list(secrets),
            commit_message=message))
        if on_plan is not None:
            on_plan(plan)
        if dry_run:
            return plan
        if api is None:
            api = _hf_api(token)
        for call in plan.calls:
            kwargs = dict(call.kwargs)
            if call.secret is not None:
                kwargs["value"] = secrets[call.secret]
            getattr(api, call.method)(**kwargs)
            out.print(f"[green]✓[/] {escape(call.render())}")
    return plan


def _hf_api(token: str | None) -> Any:
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise PushError("`huggingface_hub` is needed to push: pip install 'openenv-sdk[hub]'") from None
    return HfApi(token=token)


class _staging:
    def __init__(self, stage_dir: str | Path | None) -> None:
        self.stage_dir = Path(stage_dir) if stage_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path:
        if self.stage_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="openenv-space-")
            return Path(self._tmp.name)
        if self.stage_dir.exists() and (not self.stage_dir.is_dir() or any(self.stage_dir.iterdir())):
            raise PushError(f"--stage-dir {self.stage_dir} exists and is not an empty folder")
        self.stage_dir.mkdir(parents=True, exist_ok=True)
        return self.stage_dir

    def __exit__(self, *exc_info: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


# --- the command ----------------------------------------------------------------------------


def push(
    path: Annotated[Path, typer.Argument(help="Environment folder (holds openenv.yaml).", show_default=False)],
    repo_id: Annotated[str, typer.Option("--repo-id", help="The Space, as ORG/NAME.", show_default=False)],
    private: Annotated[bool, typer.Option("--private", help="Create the Space private.")] = False,
    secret: Annotated[
        list[str] | None,
        typer.Option("--secret", help="Space secret KEY, its value read from this environment (repeatable).",
                     show_default=False),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Hugging Face token (default: HF_TOKEN or `hf auth login`).",
                                              show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Stage the Space and list the calls; make none.")] = False,
    base_image: Annotated[str | None, typer.Option(help="Base image of a generated Dockerfile.")] = None,
    stage_dir: Annotated[Path | None, typer.Option(help="Stage the Space here (kept) instead of a temporary folder.")] = None,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Publish an environment folder as a Hugging Face Docker Space.

    Manifest `variables` become Space variables; each --secret KEY becomes a Space secret whose
    value is read from this host's environment variable KEY (logs show KEY=***).

    Examples:
        openenv push environments/echo --repo-id my-org/echo --dry-run
        openenv push environments/wordle --repo-id my-org/wordle --private
        OPENAI_API_KEY=... openenv push environments/judge --repo-id my-org/judge --secret OPENAI_API_KEY
    """
    fmt = resolve_format(output_format, json_flag)
    secrets: dict[str, str] = {}
    for key in secret or []:
        name = key.split("=", 1)[0]
        if "=" in key or not _SECRET_KEY_RE.match(name):
            fail(f"--secret takes a variable name, not a value: --secret {name}",
                 hint=f"export {name}=... first; push reads the value from the environment", code=2)
        if name not in os.environ:
            fail(f"--secret {name}: the environment variable {name} is not set",
                 hint=f"export {name}=... and run the command again", code=2)
        secrets[name] = os.environ[name]
    if not _REPO_ID_RE.match(repo_id):
        fail(f"invalid --repo-id {repo_id!r}: expected ORG/NAME", hint="e.g. --repo-id my-org/echo", code=2)
    try:
        plan = push_space(path, repo_id, private=private, secrets=secrets, token=token, dry_run=dry_run,
                          base_image=base_image, stage_dir=stage_dir,
                          on_plan=lambda staged: _report(staged, fmt, dry_run=dry_run))
    except Exception as e:
        if debug_enabled():
            raise
        message, hint = _known_error(e, path)
        fail(message, hint=hint)
        return
    if fmt is OutputFormat.human and not dry_run:
        console.print(f"Pushed: [bold]{plan.url}[/]")


def _report(plan: SpacePlan, fmt: OutputFormat, *, dry_run: bool) -> None:
    if fmt is OutputFormat.json:
        print_json({"repo_id": plan.repo_id, "url": plan.url, "dry_run": dry_run, "files": plan.files,
                    "calls": [{"method": c.method, "kwargs": {**c.kwargs, **({"value": _REDACTED} if c.secret else {})}}
                              for c in plan.calls]})
        return
    if fmt is OutputFormat.quiet:
        return
    console.print(f"Space [bold]{plan.repo_id}[/] staged ({len(plan.files)} files):")
    wheels: dict[str, int] = {}
    for file in plan.files:
        if file.startswith("wheels/"):
            group = file.rsplit("/", 1)[0]
            wheels[group] = wheels.get(group, 0) + 1
        else:
            console.print(f"  {escape(file)}")
    for group, count in wheels.items():
        console.print(f"  {group}/ ({count} files)")
    variables = [c.kwargs for c in plan.calls if c.method == "add_space_variable"]
    secrets = [c.secret for c in plan.calls if c.secret is not None]
    if variables:
        console.print("Variables: " + escape(", ".join(f"{v['key']}={v['value']}" for v in variables)))
    if secrets:
        console.print("Secrets: " + escape(", ".join(f"{key}={_REDACTED}" for key in secrets)))
    console.print("Calls:" if dry_run else "Calling:")
    for call in plan.calls:
        console.print(f"  {escape(call.render())}")
    if dry_run:
        console.print("[dim]Dry run: nothing was sent.[/]")


def _known_error(error: Exception, path: Path) -> tuple[str, str]:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, ManifestError):
        return first, f"Check the folder with: openenv validate {path} --static-only"
    if isinstance(error, PushError):
        return first, "See: openenv push --help"
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status in (401, 403):
        return f"the Hub refused the token ({status}): {first}", "Log in with `hf auth login`, or pass --token"
    if type(error).__module__.startswith(("huggingface_hub", "requests", "httpx")):
        return f"the Hub call failed: {first}", "Run again with OPENENV_DEBUG=1 for the traceback"
    return f"{type(error).__name__}: {first}", "Run again with OPENENV_DEBUG=1 for the traceback"
