"""Tests for openenv_sdk/manifest.py: real openenv.yaml files in tmp_path."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from openenv_sdk.errors import OpenEnvError
from openenv_sdk.manifest import (
    Catalog,
    Manifest,
    ManifestError,
    ManifestWarning,
    load_catalog,
    load_manifest,
    parse_memory_size,
)

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_manifest_docs", ROOT / "scripts" / "gen_manifest_docs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(folder: Path, text: str) -> Path:
    path = folder / "openenv.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# The manifest `openenv init` writes (openenv 0.10, cli/templates/openenv_env/openenv.yaml),
# plus the `variables:` mapping that `openenv push` reads.
OPENENV_MANIFEST = """\
    spec_version: 1
    name: echo_env
    version: 0.1.0
    type: space
    runtime: fastapi
    app: server.app:app
    port: 8000
    variables:
      LOG_LEVEL: debug
      WORKERS: 2
      ENABLE_WEB_INTERFACE: true
    validation:
      reward:
        range: [0.0, 1.0]
        oracle_tolerance: 0.0
        floor_margin: 0.1
      resources:
        cpu: 1.0
        memory_mb: 1024
        disk_mb: 512
        episode_timeout_s: 60.0
      capabilities:
        verifier:
          kind: reward_channel
      types:
        tags: [demo]
"""


def test_openenv_manifest_loads_unchanged(tmp_path):
    manifest = load_manifest(write(tmp_path, OPENENV_MANIFEST))

    assert (manifest.spec_version, manifest.name, manifest.version) == (1, "echo_env", "0.1.0")
    assert (manifest.type, manifest.runtime, manifest.app, manifest.port) == (
        "space",
        "fastapi",
        "server.app:app",
        8000,
    )
    # OpenEnv's `push` sends str(value) for each variable.
    assert manifest.variables == {"LOG_LEVEL": "debug", "WORKERS": "2", "ENABLE_WEB_INTERFACE": "True"}
    assert manifest.validation is not None
    assert manifest.validation.reward.range == (0.0, 1.0)
    assert manifest.validation.reward.floor_margin == 0.1
    assert manifest.validation.resources.memory_mb == 1024
    assert manifest.validation.capabilities.verifier.kind == "reward_channel"
    assert manifest.validation.types.tags == ["demo"]
    assert manifest.environment is None


def test_openenv_validation_block_schema_2(tmp_path):
    text = OPENENV_MANIFEST + "      execution:\n        probe_path: validation/runtime.json\n"
    manifest = load_manifest(write(tmp_path, text))

    assert manifest.validation.execution.kind == "openenv_ws"
    assert manifest.validation.execution.dockerfile == "Dockerfile"


def test_full_manifest_from_the_docs(tmp_path):
    manifest = load_manifest(write(tmp_path, _generator().EXAMPLE))

    assert manifest.environment == "echo_env:EchoEnvironment"
    assert manifest.grader == "grader:EchoGrader"
    assert manifest.dependencies == ["numpy>=2"]
    assert manifest.base_image == "python:3.11-slim"
    assert manifest.resources.memory == "512m"
    assert manifest.resources.memory_bytes == 512 * 1024**2
    assert (manifest.resources.cpus, manifest.resources.pids) == (0.5, 128)
    assert (manifest.network.policy, manifest.network.allow, manifest.network.grading_allow) == ("allowlist", ["pypi.org"], [])
    assert manifest.server.model_dump() == {
        "max_sessions": 16,
        "idle_timeout_s": 120.0,
        "tool_timeout_s": 10.0,
        "unreset_grace_s": 30.0,
        "max_mcp_sessions": 1024,
        "max_message_bytes": 8 * 1024 * 1024,
        "max_tool_result_bytes": 4 * 1024 * 1024,
        "max_transcript_bytes": 4 * 1024 * 1024,
        "workers": 1,
        "web": False,
    }
    assert manifest.source == tmp_path / "openenv.yaml"


def test_openenv_example_from_the_docs_loads(tmp_path):
    assert load_manifest(write(tmp_path, _generator().OPENENV_EXAMPLE)).validation is not None


def test_defaults_of_a_minimal_manifest(tmp_path):
    manifest = load_manifest(write(tmp_path, "name: tiny\n"))

    assert manifest.model_dump() == Manifest(name="tiny").model_dump()
    assert (manifest.spec_version, manifest.port, manifest.description) == (1, 8000, "")
    assert manifest.resources.memory_bytes == 2 * 1024**3
    assert manifest.network.policy == "none"
    assert manifest.server.idle_timeout_s == 300.0
    assert manifest.validation is None


def test_load_from_a_folder(tmp_path):
    write(tmp_path, "name: tiny\n")

    assert load_manifest(tmp_path).source == tmp_path / "openenv.yaml"


def test_unknown_keys_warn_with_did_you_mean(tmp_path):
    path = write(
        tmp_path,
        """\
        name: echo_env
        resouces:
          memory: 1g
        resources:
          memroy: 1g
        validation_block: {}
        """,
    )
    with pytest.warns(ManifestWarning) as record:
        manifest = load_manifest(path)

    assert [str(warning.message) for warning in record] == [
        f"{path}: unknown key 'resouces' is ignored. Did you mean 'resources'?",
        f"{path}: unknown key 'validation_block' is ignored. Did you mean 'validation'?",
        f"{path}: unknown key 'resources.memroy' is ignored. Did you mean 'resources.memory'?",
    ]
    assert manifest.resources.memory == "2g"


def test_unknown_key_without_a_near_match(tmp_path):
    path = write(tmp_path, "name: echo_env\nzzz: 1\n")

    with pytest.warns(ManifestWarning) as record:
        load_manifest(path)

    assert str(record[0].message) == f"{path}: unknown key 'zzz' is ignored."


def test_wrong_type_names_file_and_field_path(tmp_path):
    path = write(tmp_path, "name: echo_env\nresources:\n  cpus: lots\n")

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert (
        str(info.value)
        == f"{path}: resources.cpus: Input should be a valid number, unable to parse string as a number"
    )
    assert isinstance(info.value, OpenEnvError)


def test_every_error_is_reported(tmp_path):
    path = write(tmp_path, "name: echo_env\nport: 70000\nserver:\n  max_sessions: 0\n")

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value).splitlines() == [
        f"{path}: port: Input should be less than or equal to 65535",
        f"{path}: server.max_sessions: Input should be greater than or equal to 1",
    ]


def test_bad_memory_size(tmp_path):
    path = write(tmp_path, "name: echo_env\nresources:\n  memory: 2 gigs\n")

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value) == (
        f"{path}: resources.memory: invalid memory size '2 gigs': "
        "expected a number and a unit b, k, m, g or t, e.g. '512m' or '2g'"
    )


def test_missing_name(tmp_path):
    path = write(tmp_path, "type: space\n")

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value) == f"{path}: name: Field required"


def test_bad_import_reference(tmp_path):
    path = write(tmp_path, "name: echo_env\nenvironment: echo_env.EchoEnvironment\n")

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value) == (
        f"{path}: environment: expected 'module:attribute' (e.g. 'echo_env:EchoEnvironment'), "
        "got 'echo_env.EchoEnvironment'"
    )


@pytest.mark.parametrize(
    ("network", "message"),
    [
        ("{policy: allowlist}", "network: policy 'allowlist' needs at least one entry in allow (or grading_allow)"),
        (
            "{policy: none, allowed_hosts: [x]}",
            "network: allow and grading_allow are only used with policy 'allowlist', not 'none'",
        ),
        ("{policy: allowlist, allow: [169.254.169.254]}", "network.allow: network allowlist entry '169.254.169.254' is an IP address; name the host instead (addresses are never allowed)"),
        ("{policy: allowlist, grading_allow: ['*']}", "network.grading_allow: network allowlist entry '*' is not a host name (letters, digits, '-', '.'; '*.' only in front)"),
        ("{policy: open}", "network.policy: Input should be 'none', 'bridge' or 'allowlist'"),
    ],
)
def test_bad_network(tmp_path, network, message):
    path = write(tmp_path, f"name: echo_env\nnetwork: {network}\n")

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value) == f"{path}: {message}"


def test_wrong_type_inside_the_validation_block(tmp_path):
    path = write(tmp_path, OPENENV_MANIFEST.replace("memory_mb: 1024", "memory_mb: lots"))

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value) == (
        f"{path}: validation.resources.memory_mb: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- name: echo_env\n", "expected a mapping of keys to values, got list"),
        ("name: [unclosed\n", "not valid YAML: "),
    ],
)
def test_not_a_manifest(tmp_path, text, message):
    path = write(tmp_path, text)

    with pytest.raises(ManifestError) as info:
        load_manifest(path)

    assert str(info.value).startswith(f"{path}: {message}")


def test_missing_file(tmp_path):
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path)

    assert str(info.value) == f"{tmp_path / 'openenv.yaml'}: no such file"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512m", 512 * 1024**2),
        ("512MiB", 512 * 1024**2),
        ("512mb", 512 * 1024**2),
        ("1.5g", 3 * 1024**3 // 2),
        ("64k", 64 * 1024),
        ("1t", 1024**4),
        ("1024", 1024),
        ("1024b", 1024),
    ],
)
def test_parse_memory_size(text, size):
    assert parse_memory_size(text) == size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0m", "invalid memory size '0m': must be at least 1 byte"),
        (
            "-1g",
            "invalid memory size '-1g': expected a number and a unit b, k, m, g or t, e.g. '512m' or '2g'",
        ),
        ("g", "invalid memory size 'g': expected a number and a unit b, k, m, g or t, e.g. '512m' or '2g'"),
    ],
)
def test_parse_memory_size_rejects(text, message):
    with pytest.raises(ValueError) as info:
        parse_memory_size(text)

    assert str(info.value) == message


def test_catalog(tmp_path):
    path = write(
        tmp_path,
        """\
        environments:
          - name: echo_env
            path: environments/echo_env
          - name: coding_env
            path: environments/coding_env
        """,
    )
    catalog = load_catalog(tmp_path)

    assert [(entry.name, entry.path) for entry in catalog.environments] == [
        ("echo_env", "environments/echo_env"),
        ("coding_env", "environments/coding_env"),
    ]
    assert catalog.source == path


def test_catalog_errors_name_the_entry(tmp_path):
    path = write(
        tmp_path, "environments:\n  - name: echo_env\n    path: environments/echo_env\n  - name: coding_env\n"
    )

    with pytest.raises(ManifestError) as info:
        load_catalog(path)

    assert str(info.value) == f"{path}: environments[1].path: Field required"


def test_catalog_unknown_key_in_an_entry_warns(tmp_path):
    path = write(tmp_path, "environments:\n  - name: echo_env\n    pth: environments/echo_env\n    path: x\n")

    with pytest.warns(ManifestWarning) as record:
        load_catalog(path)

    assert (
        str(record[0].message)
        == f"{path}: unknown key 'environments[0].pth' is ignored. Did you mean 'environments[0].path'?"
    )


def test_catalog_duplicate_names(tmp_path):
    path = write(tmp_path, "environments:\n  - {name: a, path: a}\n  - {name: a, path: b}\n")

    with pytest.raises(ManifestError) as info:
        load_catalog(path)

    assert str(info.value) == f"{path}: (top level): duplicate environment names: a"


def _models(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for field in model.model_fields.values():
        for nested in _generator().nested_models(field.annotation):
            found |= _models(nested)
    return found


@pytest.mark.parametrize("root", [Manifest, Catalog])
def test_every_field_has_a_description(root):
    missing = [
        f"{model.__name__}.{name}"
        for model in _models(root)
        for name, field in model.model_fields.items()
        if not field.description
    ]

    assert missing == []


def test_json_schema():
    schema = Manifest.model_json_schema()

    assert schema["required"] == ["name"]
    assert schema["properties"]["resources"]["description"] == "Container limits."
    assert "ValidationReward" in schema["$defs"]


def test_docs_match_the_generator():
    generator = _generator()

    assert generator.DOCS_PATH.read_text(encoding="utf-8") == generator.render(), (
        "docs/manifest.md is stale: run python scripts/gen_manifest_docs.py"
    )
