"""The authoring contract: what a class may define, what it is refused, and what it gets for free."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.envs import ProbeAction, ProbeEnv, ProbeObservation, ProbeState, ToolOnlyEnv

from openenv_sdk import (
    Action,
    Environment,
    EnvironmentDefinitionError,
    Observation,
    State,
    ToolCallAction,
    create_app,
    orchestrator,
    tool,
)

# --- reserved names ---------------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["reset", "step", "state", "close"])
def test_a_tool_method_named_after_a_verb_is_refused(verb: str) -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:
        type("Clash", (Environment,), {verb: tool(lambda self: None)})
    assert str(refused.value) == (
        f"Clash.{verb}: a tool cannot be named {verb!r}: reset, step, state and close are the orchestrator's "
        f"verbs and are never exposed to the agent. Rename the method (a tool method named {verb!r} would "
        f"also replace the orchestrator's {verb})."
    )


@pytest.mark.parametrize("verb", ["reset", "step", "state", "close"])
def test_a_tool_renamed_to_a_verb_is_refused(verb: str) -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:

        class Renamed(Environment):
            @tool(name=verb)
            def finish(self) -> None:
                """Finish."""

    assert str(refused.value) == (
        f"Renamed.finish: a tool cannot be named {verb!r}: reset, step, state and close are the orchestrator's "
        f"verbs and are never exposed to the agent. Rename the method, or pass @tool(name=...) with another name."
    )


def test_an_orchestrator_call_named_after_a_verb_is_refused() -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:

        class Clash(Environment):
            @orchestrator
            def state(self) -> None:  # type: ignore[override]
                """Clash."""

    assert str(refused.value) == (
        "Clash: orchestrator calls cannot be named ['state']: reset, step, state and close are the "
        "orchestrator's verbs already. Rename the method."
    )


def test_definition_errors_are_type_errors() -> None:
    assert issubclass(EnvironmentDefinitionError, TypeError)


# --- type parameters --------------------------------------------------------------------------


def test_type_parameters_become_the_models() -> None:
    assert ProbeEnv.action_type is ProbeAction
    assert ProbeEnv.observation_type is ProbeObservation
    assert ProbeEnv.state_type is ProbeState


def test_subclass_inherits_the_models() -> None:
    class Child(ProbeEnv):
        pass

    assert Child.action_type is ProbeAction
    assert Child.state_type is ProbeState


def test_a_type_parameter_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:

        class Wrong(Environment[Action, State, State]):  # type: ignore[type-var]
            pass

    assert str(refused.value) == (
        f"Wrong: type parameter observation must subclass openenv_sdk.Observation, got {State!r}"
    )


def test_untyped_environment_uses_the_base_models() -> None:
    assert (ToolOnlyEnv.action_type, ToolOnlyEnv.observation_type, ToolOnlyEnv.state_type) == (
        Action,
        Observation,
        State,
    )


# --- names and descriptions ----------------------------------------------------------------------


def test_name_and_description_defaults() -> None:
    class Unnamed(Environment):
        """First paragraph
        on two lines.

        Not this one.
        """

    assert Unnamed.name == "Unnamed"
    assert Unnamed.description == "First paragraph\non two lines."


def test_explicit_name_is_kept() -> None:
    assert ProbeEnv.name == "probe"
    assert ProbeEnv.description == "A configurable environment for testing servers."


# --- tools and orchestrator calls collected -----------------------------------------------------


def test_tools_and_orchestrator_calls_are_collected() -> None:
    assert list(ProbeEnv.tool_specs) == ["echo", "aecho", "add", "explode", "slow", "slow_sync", "whoami", "episode"]
    assert ProbeEnv.orchestrator_calls == {"secret": "secret"}
    assert "secret" not in ProbeEnv.tool_specs


def test_subclass_can_override_a_tool() -> None:
    class Louder(ProbeEnv):
        @tool
        def echo(self, message: str) -> str:
            """Shout it."""
            return message.upper()

    assert Louder.tool_specs["echo"].description == "Shout it."
    assert list(Louder.tool_specs) == ["aecho", "add", "explode", "slow", "slow_sync", "whoami", "episode", "echo"]
    assert ProbeEnv.tool_specs["echo"].description == "Return the message unchanged."


def test_default_step_handles_tool_calls() -> None:
    assert ToolOnlyEnv.handles_tool_calls_in_step() is True
    assert ProbeEnv.handles_tool_calls_in_step() is False


def test_default_step_without_tool_call_says_what_to_do() -> None:
    class Bare(Environment):
        pass

    with pytest.raises(NotImplementedError) as refused:
        Bare().step(Action())
    assert str(refused.value) == (
        "Bare has no step() for Action: implement step(), or send tool-call actions "
        "({'tool': name, 'arguments': {...}})"
    )


def test_default_reset_starts_an_episode() -> None:
    env = ToolOnlyEnv()
    env.episode_done = True
    observation = env.reset(episode_id="given")
    assert isinstance(observation, Observation)
    assert env.state.episode_id == "given"
    assert env.episode_done is False
    assert len(ToolOnlyEnv().reset().metadata) == 0
    fresh = ToolOnlyEnv()
    fresh.reset()
    assert fresh.state.episode_id and len(fresh.state.episode_id) == 32


def test_state_is_set_through_the_public_property_with_its_type_checked() -> None:
    class Env(Environment[ProbeAction, ProbeObservation, ProbeState]):
        pass

    env = Env()
    env.state = ProbeState(episode_id="mine")
    assert env.state.episode_id == "mine"
    with pytest.raises(TypeError, match=r"Env.state must be a ProbeState \(its state_type\), got State"):
        env.state = State(episode_id="wrong type")
    assert env.state.episode_id == "mine"


def test_tool_call_action_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        ToolCallAction.model_validate({"tool": "echo", "arguments": {}, "argumnets": {}})


# --- create_app -----------------------------------------------------------------------------------


@pytest.mark.parametrize("not_an_env", [int, ProbeEnv(), "ProbeEnv"])
def test_create_app_needs_an_environment_class(not_an_env: Any) -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:
        create_app(not_an_env)
    assert str(refused.value) == f"create_app needs an Environment subclass, got {not_an_env!r}"
