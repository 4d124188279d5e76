"""The `openenv.yaml` manifest and the repository catalog, as pydantic models.

A manifest is a superset of OpenEnv's (`openenv` 0.10): every key OpenEnv writes
(`spec_version`, `name`, `type`, `runtime`, `app`, `port`, `variables`, `version`, and the
`validation:` block its validator reads) loads unchanged, and the keys this SDK adds
(`environment`, `grader`, `dependencies`, `resources`, `network`, `server`, ...) have safe
defaults. An unknown key is a `ManifestWarning` with a "Did you mean" hint, never an error; a
value of the wrong type is a `ManifestError` naming the file and the field path.

Field descriptions are the reference documentation: `scripts/gen_manifest_docs.py` renders
`docs/manifest.md` from them.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from openenv_sdk._suggest import did_you_mean
from openenv_sdk.errors import ManifestError

__all__ = [
    "MANIFEST_FILENAME",
    "Catalog",
    "CatalogEntry",
    "Manifest",
    "ManifestError",
    "ManifestWarning",
    "Network",
    "Resources",
    "ServerSettings",
    "Validation",
    "load_catalog",
    "load_manifest",
    "parse_memory_size",
]

MANIFEST_FILENAME = "openenv.yaml"

_MEMORY_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_MEMORY_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:(b)|([kmgt])(?:i?b)?)?$")
_IMPORT_REF_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class ManifestWarning(UserWarning):
    """A manifest loaded, but has something worth fixing (e.g. an unknown key)."""


def parse_memory_size(text: str) -> int:
    """Parse a Docker-style memory size into bytes.

    Units are binary and case-insensitive: `b`, `k`, `m`, `g`, `t`, optionally followed by
    `b` or `ib` (`"512m"`, `"512MiB"` and `"512mb"` are all 512 * 1024**2). A bare number is bytes.

    Raises:
        ValueError: the text is not a size, or the size is zero.
    """
    match = _MEMORY_RE.match(text.strip().lower())
    if match is None:
        raise ValueError(
            f"invalid memory size {text!r}: expected a number and a unit b, k, m, g or t, e.g. '512m' or '2g'"
        )
    number, _, unit = match.groups()
    size = int(float(number) * _MEMORY_UNITS[unit or ""])
    if size < 1:
        raise ValueError(f"invalid memory size {text!r}: must be at least 1 byte")
    return size


def _check_memory_size(text: str) -> str:
    parse_memory_size(text)
    return text


def _check_import_ref(text: str) -> str:
    if not _IMPORT_REF_RE.match(text):
        raise ValueError(f"expected 'module:attribute' (e.g. 'echo_env:EchoEnvironment'), got {text!r}")
    return text


_ORACLE_REF_RE = re.compile(r"^(?:[A-Za-z_][\w-]*/)*[A-Za-z_][\w.-]*:[A-Za-z_]\w*$")


def _check_oracle_ref(text: str) -> str:
    module, _, _ = text.rpartition(":")
    if not _ORACLE_REF_RE.match(text) or (module.endswith(".py") is False and "/" in module) or ".." in module:
        raise ValueError(
            f"expected 'FILE_OR_MODULE:FUNCTION' relative to the folder (e.g. 'oracle.py:act' or 'oracle:act'), got {text!r}"
        )
    return text


def _scalar_to_str(value: Any) -> Any:
    # OpenEnv's `push` sends `str(v)` for each variable, so YAML `DEBUG: true` is "True".
    return str(value) if isinstance(value, (bool, int, float)) else value


MemorySize = Annotated[str, AfterValidator(_check_memory_size)]
ImportRef = Annotated[str, AfterValidator(_check_import_ref)]
OracleRef = Annotated[str, AfterValidator(_check_oracle_ref)]
VariableValue = Annotated[str, BeforeValidator(_scalar_to_str)]


class _Section(BaseModel):
    # Unknown keys are kept (and warned about by the loader), known ones are typed.
    model_config = ConfigDict(extra="allow", frozen=True)


# --- OpenEnv 0.10's `validation:` block (openenv/validation/manifest.py) -----------------


class ValidationReward(_Section):
    """The declared reward contract that OpenEnv's validator measures rewards against."""

    range: tuple[float, float] = Field(
        default=(0.0, 1.0), description="Lowest and highest reward, `[low, high]`."
    )
    oracle_tolerance: float = Field(
        default=0.0,
        ge=0.0,
        description="The oracle passes when its reward is at least `high - oracle_tolerance`.",
    )
    floor_margin: float = Field(
        ge=0.0, description="The measured floor (e.g. a random policy) must stay this far below `high`."
    )
    variance_tolerance: float | None = Field(
        default=None, ge=0.0, description="Bound on reward variance; required when `capabilities.llm_judged`."
    )


class ValidationResources(_Section):
    """The resource budget OpenEnv's validator checks measured usage against."""

    cpu: float = Field(gt=0.0, description="CPU cores.")
    memory_mb: int = Field(gt=0, description="Memory in MB.")
    disk_mb: int = Field(gt=0, description="Disk in MB.")
    episode_timeout_s: float = Field(gt=0.0, description="Longest an episode may take, in seconds.")
    gpus: int = Field(default=0, ge=0, description="Number of GPUs.")
    gpu_types: list[str] = Field(default_factory=list, description="Accepted GPU types; needs `gpus` > 0.")


class ValidationNetwork(_Section):
    """The network posture declared to OpenEnv's validator (Harbor's `network_mode`)."""

    mode: Literal["public", "no-network", "allowlist"] = Field(default="public", description="Egress policy.")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Hosts, CIDR ranges or wildcards reachable with mode `allowlist`."
    )


class ValidationOracle(_Section):
    """How the package demonstrates the maximum reward."""

    form: Literal["injected_state", "script"] = Field(
        description="`injected_state` (needs `set_state`) or `script` (run inside the sandbox)."
    )
    location: str = Field(description="Package-relative path of the oracle artifact.")


class ValidationVerifier(_Section):
    """How "evaluate this state" is invoked."""

    kind: Literal["reward_channel", "script"] = Field(
        description="`reward_channel` (the served reward) or `script` (e.g. `tests/test.sh`)."
    )
    entry: str | None = Field(default=None, description="Script path; required when `kind` is `script`.")


class ValidationCapabilities(_Section):
    """Declared capabilities; they select OpenEnv's contract checks."""

    oracle: ValidationOracle | None = Field(
        default=None, description="The oracle; without it the oracle check fails."
    )
    verifier: ValidationVerifier = Field(description="How the verifier is invoked.")
    set_state: bool = Field(default=False, description="`reset()` accepts an `injected_state` argument.")
    llm_judged: bool = Field(default=False, description="The reward involves an LLM judge (needs `judge`).")
    rubric_tree: bool = Field(default=False, description="An OpenEnv `Rubric` is present.")
    task_api: bool = Field(default=False, description="The environment implements OpenEnv's `TaskProvider`.")
    canaries: str | None = Field(default=None, description="Package-relative path of canary trajectories.")
    declared_tools: list[str] = Field(
        default_factory=list, description="Tool names, checked against the server's."
    )
    declared_task_count: dict[str, int] = Field(
        default_factory=dict, description="Task count per split, checked against discovery."
    )


class ValidationTypes(_Section):
    """Type tags; they select OpenEnv's domain checks."""

    tags: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1, description="Tags such as `swe`; a prefix scopes one to a hub (`hf:agentic-swe`)."
    )


class ValidationJudge(_Section):
    """The pinned LLM judge; required when `capabilities.llm_judged`."""

    model: str = Field(description="Judge model id.")
    version: str = Field(description="Judge model version.")
    params: dict[str, Any] = Field(default_factory=dict, description="Sampling parameters of the judge.")


class ValidationTaskDistribution(_Section):
    """Pins for generated or externally sourced tasks."""

    generator_seed: int | None = Field(default=None, description="Seed of the task generator.")
    dataset_version: str | None = Field(default=None, description="Version of the task data set.")
    generator_model: str | None = Field(default=None, description="Model that generated the tasks.")


class ValidationExecution(_Section):
    """The runtime binding (OpenEnv manifest schema 2): how the validator starts the server."""

    kind: Literal["openenv_ws"] = Field(default="openenv_ws", description="Transport binding.")
    probe_path: str = Field(
        default="validation/runtime.json", description="Package-relative JSON file with the runtime plan."
    )
    dockerfile: str = Field(default="Dockerfile", description="Dockerfile, relative to the package.")
    context: str = Field(default=".", description="Build context, relative to the package.")
    agent_boundary: Literal["api"] = Field(default="api", description="What the agent may access.")
    requires_credentials: bool = Field(
        default=False, strict=True, description="Runtime needs credentials (runtime checks are then skipped)."
    )


class Validation(_Section):
    """OpenEnv 0.10's `validation:` block, read by `openenv validate` (OpenEnv's CLI).

    Only its shape and types are checked here; OpenEnv's validator applies its own rules
    (e.g. `judge` exactly when `llm_judged`).
    """

    reward: ValidationReward = Field(description="The reward contract.")
    resources: ValidationResources = Field(description="The resource budget.")
    capabilities: ValidationCapabilities = Field(description="Declared capabilities.")
    types: ValidationTypes = Field(description="Type tags.")
    network: ValidationNetwork | None = Field(
        default=None, description="Network posture; OpenEnv assumes `public`."
    )
    judge: ValidationJudge | None = Field(default=None, description="The pinned LLM judge.")
    task_distribution: ValidationTaskDistribution | None = Field(
        default=None, description="Task distribution pins."
    )
    execution: ValidationExecution | None = Field(
        default=None, description="Runtime binding; its presence selects OpenEnv manifest schema 2."
    )


# --- What this SDK adds -------------------------------------------------------------------


class Resources(_Section):
    """Limits of the environment's container."""

    memory: MemorySize = Field(
        default="2g", description="Memory limit, Docker-style with a binary unit: `512m`, `2g`."
    )
    cpus: float = Field(default=1.0, gt=0.0, description="CPU cores (fractions allowed).")
    pids: int = Field(default=512, ge=1, description="Most processes and threads the container may run.")

    @property
    def memory_bytes(self) -> int:
        """`memory` in bytes."""
        return parse_memory_size(self.memory)


class Network(_Section):
    """Network access: the container's own, and what sandboxed commands reach, per phase.

    Sandboxed commands (tool commands, agent programs, checks) never share the container's
    network: each runs in a network namespace of its own. They reach a host only through the
    allowlist proxy (`openenv_sdk.sandbox.Egress`), and only a host listed for their phase:
    `allow` for the agent's phase (tool commands and agent programs), `grading_allow` for the
    grader's sandboxes (none by default). Entries are host names (`pypi.org`, `pypi.org:443`,
    `*.pythonhosted.org`), never addresses; a name that resolves to an internal address
    (loopback, private, link-local such as 169.254.169.254) is refused all the same.
    """

    policy: Literal["none", "bridge", "allowlist"] = Field(
        default="none",
        description="The container's egress. `none`: none; `bridge`: full egress for the server itself "
        "(commands still reach nothing); `allowlist`: egress for the server's proxy, through which commands "
        "reach only the hosts in `allow` / `grading_allow`.",
    )
    allow: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("allow", "allowed_hosts"),
        description="Hosts tool commands and agent programs may reach (through the proxy); only with policy "
        "`allowlist`. `allowed_hosts` is read as this.",
    )
    grading_allow: list[str] = Field(
        default_factory=list,
        description="Hosts the grader's sandboxed commands may reach; none by default. Only with policy `allowlist`.",
    )

    @field_validator("allow", "grading_allow")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        from .sandbox._allowlist import parse_allow

        parse_allow(value)  # raises ValueError naming an entry that is not a host name
        return value

    @model_validator(mode="after")
    def _hosts_match_policy(self) -> Network:
        if self.policy == "allowlist" and not (self.allow or self.grading_allow):
            raise ValueError("policy 'allowlist' needs at least one entry in allow (or grading_allow)")
        if self.policy != "allowlist" and (self.allow or self.grading_allow):
            raise ValueError(f"allow and grading_allow are only used with policy 'allowlist', not {self.policy!r}")
        return self

    @property
    def allowed_hosts(self) -> list[str]:
        """`allow`, by its former name."""
        return self.allow


class Sandbox(_Section):
    """How an environment that runs agent commands isolates them inside its container.

    When set, the generated image runs the server as root and creates `user`; every agent
    command then runs as that unprivileged user (see `openenv_sdk.sandbox`), so the agent can
    neither signal the server nor read what the server keeps to itself.
    """

    user: str = Field(default="agent", min_length=1, description="Unprivileged user agent commands run as.")
    command_timeout_s: float = Field(default=30.0, gt=0.0, description="Wall-clock limit of one agent command.")
    max_output_bytes: int = Field(
        default=16 * 1024, ge=256, description="Bytes of stdout and of stderr kept per command; the rest is cut."
    )
    memory: MemorySize = Field(default="1g", description="Address-space limit of each agent process.")
    max_processes: int = Field(default=128, ge=1, description="Processes one agent command may start.")
    session_memory: MemorySize = Field(
        default="2g",
        description="Memory of all of a session's processes together, its workspace's files included "
        "(a cgroup per session, as root); past it the kernel kills a process of that session only.",
    )
    session_max_processes: int = Field(
        default=256, ge=8, description="Processes and threads of a whole session at once (a cgroup per session)."
    )
    workspace_size: MemorySize = Field(
        default="1g", description="Size of a session's folder (a tmpfs, as root); writing past it fails with ENOSPC."
    )
    workspace_inodes: int = Field(
        default=100_000, ge=1024, description="Files and folders a session's folder may hold."
    )
    system_packages: list[str] = Field(
        default_factory=list, description="Debian packages the image needs (e.g. `git`), installed when missing."
    )

    @property
    def memory_bytes(self) -> int:
        return parse_memory_size(self.memory)

    def session_bounds(self) -> dict[str, int]:
        """The session-wide fields of `openenv_sdk.sandbox.SandboxLimits`, from this section."""
        return {
            "session_memory_bytes": parse_memory_size(self.session_memory),
            "session_max_processes": self.session_max_processes,
            "workspace_bytes": parse_memory_size(self.workspace_size),
            "workspace_inodes": self.workspace_inodes,
        }


class ServerSettings(_Section):
    """How the server runs sessions (one session is one episode's environment instance)."""

    max_sessions: int = Field(default=64, ge=1, description="Most concurrent sessions; more are refused.")
    idle_timeout_s: float = Field(
        default=300.0, gt=0.0, description="A session idle this many seconds is closed."
    )
    tool_timeout_s: float = Field(
        default=60.0,
        gt=0.0,
        description="A tool call running longer than this many seconds fails with a timeout.",
    )
    unreset_grace_s: float = Field(
        default=30.0, gt=0.0, description="A session not reset within this many seconds of its creation is closed."
    )
    max_mcp_sessions: int = Field(default=1024, ge=1, description="Most MCP sessions held at once at `/mcp`.")
    max_message_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, description="Largest request body or WebSocket message, in bytes."
    )
    max_tool_result_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest tool result, in bytes; a larger one is cut, with a marker."
    )
    max_transcript_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=4096,
        description="Bytes of the agent's tool calls kept per session; the oldest are dropped first.",
    )
    workers: int = Field(default=1, ge=1, description="Server worker processes.")
    web: bool = Field(
        default=False, description="Serve the browser playground at `/web` (also `openenv serve --web`)."
    )


class _Document(_Section):
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The `openenv.yaml` this was loaded from (`None` when built in code)."""
        return self._source


class Manifest(_Document):
    """An environment's `openenv.yaml`."""

    spec_version: int = Field(default=1, description="Manifest format version; OpenEnv writes `1`.")
    name: str = Field(min_length=1, description="The environment's name, e.g. `echo_env`.")
    version: str | None = Field(default=None, description="The environment's version, e.g. `0.1.0`.")
    description: str = Field(
        default="", description="One paragraph on what the agent does in this environment."
    )
    type: str = Field(
        default="space", description="OpenEnv deployment type; `space` is a Hugging Face Space."
    )
    runtime: str = Field(default="fastapi", description="OpenEnv server runtime.")
    app: ImportRef | None = Field(
        default=None,
        description="OpenEnv's ASGI app as `module:attribute`, relative to the folder "
        "(e.g. `server.app:app`). Used when `environment` is not set.",
    )
    port: int = Field(
        default=8000, ge=1, le=65535, description="Port the server listens on in the container."
    )
    variables: dict[str, VariableValue] = Field(
        default_factory=dict,
        description="Environment variables of the server (OpenEnv sets them on the Space).",
    )
    environment: ImportRef | None = Field(
        default=None,
        description="The environment class as `module:Class`, imported relative to the folder "
        "(e.g. `echo_env:EchoEnvironment`).",
    )
    grader: ImportRef | None = Field(
        default=None,
        description="The grader as `module:callable_or_class`, relative to the folder; runs host-side, "
        "outside the container.",
    )
    oracle: OracleRef | None = Field(
        default=None,
        description="The reference solution as a policy, `FILE_OR_MODULE:FUNCTION` relative to the folder "
        "(e.g. `oracle.py:act`, or `oracle:act`): the function a scripted policy is "
        "(`openenv eval --policy scripted:MODULE:FUNCTION`), `act(messages, tools, context)` returning the next "
        "assistant message. It runs host-side and may read hidden data (its file never enters the image, like `hidden`); `openenv validate --deep` checks that it "
        "scores the top reward on every task, and training collects its episodes.",
    )
    dependencies: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="pip requirements installed in the image, e.g. `numpy>=2`."
    )
    base_image: str | None = Field(
        default=None, description="Base image of the container; unset for the SDK's default."
    )
    hidden: list[str] = Field(
        default_factory=lambda: ["hidden"],
        description="Paths in the folder that never enter the image (hidden tests, reference solutions): "
        "host-side graders read them and send what they need at grading time.",
    )
    sandbox: Sandbox | None = Field(
        default=None, description="Isolation of agent commands; set by environments that run them."
    )
    resources: Resources = Field(default_factory=Resources, description="Container limits.")
    network: Network = Field(default_factory=Network, description="Container network access.")
    server: ServerSettings = Field(default_factory=ServerSettings, description="Session and worker settings.")
    validation: Validation | None = Field(
        default=None, description="OpenEnv 0.10's `validation:` block, for `openenv validate`."
    )

    def host_only_paths(self) -> list[str]:
        """What never enters an image or a Space: the `hidden` paths and the oracle's file.

        The oracle runs host-side and may hold or read answers, so it is kept out of the image like
        hidden tests: an agent in the container must not find the reference solution there."""
        paths = list(self.hidden)
        if self.oracle is not None:
            module = self.oracle.rsplit(":", 1)[0]
            if module.endswith(".py"):
                paths.append(module)
            else:  # a module name: its file, or its package folder
                paths += [module.replace(".", "/") + ".py", module.replace(".", "/")]
        return paths


class CatalogEntry(_Section):
    """One environment the repository ships."""

    name: str = Field(min_length=1, description="The environment's name, as in its manifest.")
    path: str = Field(
        min_length=1, description="Its folder (holding its `openenv.yaml`), relative to the catalog."
    )


class Catalog(_Document):
    """The repository's top-level `openenv.yaml`: the environments it ships."""

    environments: list[CatalogEntry] = Field(description="The environments, one entry each.")

    @model_validator(mode="after")
    def _unique_names(self) -> Catalog:
        names = [entry.name for entry in self.environments]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate environment names: {', '.join(duplicates)}")
        return self


# --- Loading -------------------------------------------------------------------------------

_DocumentT = TypeVar("_DocumentT", bound=_Document)


def load_manifest(path: str | Path) -> Manifest:
    """Load an environment's manifest.

    Args:
        path: an `openenv.yaml` file, or the folder holding one.

    Raises:
        ManifestError: the file is missing, not YAML, or a field has a wrong type or value;
            the message names the file and each field's path.
    """
    return _load(path, Manifest)


def load_catalog(path: str | Path) -> Catalog:
    """Load the repository's catalog (its top-level `openenv.yaml`).

    Args:
        path: the catalog file, or the folder holding it.

    Raises:
        ManifestError: as for `load_manifest`.
    """
    return _load(path, Catalog)


def _load(path: str | Path, model: type[_DocumentT]) -> _DocumentT:
    file = Path(path)
    if file.is_dir():
        file = file / MANIFEST_FILENAME
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{file}: no such file") from None
    except yaml.YAMLError as e:
        raise ManifestError(f"{file}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ManifestError(f"{file}: expected a mapping of keys to values, got {type(data).__name__}")
    try:
        document = model.model_validate(data)
    except ValidationError as e:
        raise ManifestError("\n".join(f"{file}: {_format_error(error)}" for error in e.errors())) from e
    for message in _unknown_keys(document):
        warnings.warn(f"{file}: {message}", ManifestWarning, stacklevel=3)
    document._source = file
    return document


def _format_error(error: Any) -> str:
    location = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    message = str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]
    return f"{location.lstrip('.') or '(top level)'}: {message}"


def _unknown_keys(section: BaseModel, prefix: str = "") -> list[str]:
    known = list(type(section).model_fields)
    messages = []
    for key in section.model_extra or {}:
        message = f"unknown key '{prefix}{key}' is ignored."
        message += did_you_mean(key, known, prefix=prefix)
        messages.append(message)
    for name in known:
        value = getattr(section, name)
        if isinstance(value, BaseModel):
            messages += _unknown_keys(value, f"{prefix}{name}.")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    messages += _unknown_keys(item, f"{prefix}{name}[{index}].")
    return messages
