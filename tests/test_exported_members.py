"""`__all__` is the API: this pins it, so a change to it is a decision, not an accident."""

from __future__ import annotations

import openenv_sdk
import openenv_sdk.client
import openenv_sdk.rubric
import openenv_sdk.server


def test_top_level_api() -> None:
    assert sorted(openenv_sdk.__all__) == [
        "Action", "AsyncEnvClient", "AsyncGenericEnvClient", "AuthenticationError", "CallToolAction",
        "CallToolObservation", "CapacityError", "ClientStateError", "ContainerError", "DockerProvider", "EnvCheckError",
        "EnvClient", "Environment", "EnvironmentDefinitionError", "ExecutionError", "GenericEnvClient", "Grader",
        "InvalidActionError", "ListToolsAction", "ListToolsObservation", "LocalProcessProvider", "ManifestError",
        "Observation", "OpenEnvError", "Provider", "ProviderError", "RequestError", "RequestTimeout", "Score",
        "ServerConfig", "ServerError", "ServerTimeout", "SessionError", "State", "StepResult", "ToolCallAction",
        "ToolCallError", "ToolError", "ToolErrorType", "ToolFailure", "TransportError", "agrade", "check_env",
        "create_app", "grade", "orchestrator", "reward", "tool"
    ]  # fmt: skip
    for name in openenv_sdk.__all__:
        assert getattr(openenv_sdk, name) is not None, name


def test_server_and_rubric_api() -> None:
    assert sorted(openenv_sdk.server.__all__) == ["ORCHESTRATOR_TOKEN_VAR", "ServerConfig", "create_app", "uvicorn_limits"]
    assert sorted(openenv_sdk.rubric.__all__) == [
        "EnvReward", "FunctionRubric", "Gate", "Grader", "Rubric", "Score", "Sequence", "WeightedSum",
        "agrade", "grade", "reward",
    ]  # fmt: skip


def test_every_exported_client_name_exists() -> None:
    for name in openenv_sdk.client.__all__:
        assert hasattr(openenv_sdk.client, name), name


def test_top_level_names_are_the_same_objects_and_import_lazily() -> None:
    """`from openenv_sdk import GenericEnvClient` works (OpenEnv users write it first) without
    `import openenv_sdk` importing the server, the clients or the providers."""
    import subprocess
    import sys

    import openenv_sdk.checks
    import openenv_sdk.providers

    assert openenv_sdk.GenericEnvClient is openenv_sdk.client.GenericEnvClient
    assert openenv_sdk.DockerProvider is openenv_sdk.providers.DockerProvider
    assert openenv_sdk.grade is openenv_sdk.rubric.grade
    assert openenv_sdk.check_env is openenv_sdk.checks.check_env
    code = "import sys, openenv_sdk; print(sorted(m for m in ('fastapi', 'httpx', 'websockets', 'docker', 'openenv_sdk.client', 'openenv_sdk.checks') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_harbor_and_tracing_api() -> None:
    import openenv_sdk.harbor
    import openenv_sdk.tracing

    assert sorted(openenv_sdk.harbor.__all__) == [
        "HarborComposeError", "HarborImportError", "HarborNameError", "HarborSizeError", "HarborTask", "ImportReport",
        "Verification", "build_task_image", "import_harbor_task", "read_harbor_task", "verify_imported",
    ]  # fmt: skip
    assert sorted(openenv_sdk.tracing.__all__) == [
        "ENABLE_ENV", "enabled", "extract", "inject", "refresh", "set_attributes", "span", "wrap"
    ]  # fmt: skip
    for module in (openenv_sdk.harbor, openenv_sdk.tracing):
        for name in module.__all__:
            assert getattr(module, name) is not None, name
