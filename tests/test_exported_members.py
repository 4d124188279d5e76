"""`__all__` is the API: this pins it, so a change to it is a decision, not an accident."""

from __future__ import annotations

import openenv_sdk
import openenv_sdk.client
import openenv_sdk.rubric
import openenv_sdk.server


def test_top_level_api() -> None:
    assert sorted(openenv_sdk.__all__) == [
        "Action", "CallToolAction", "CallToolObservation", "CapacityError", "ClientStateError",
        "ContainerError", "Environment", "EnvironmentDefinitionError", "InvalidActionError",
        "ListToolsAction", "ListToolsObservation", "ManifestError", "Observation", "OpenEnvError",
        "ProviderError", "RequestTimeout", "ServerConfig", "ServerError", "SessionError", "State",
        "ToolCallAction", "ToolCallError", "ToolError", "ToolErrorType", "TransportError",
        "create_app", "orchestrator", "tool",
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
