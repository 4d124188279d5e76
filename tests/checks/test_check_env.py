"""`check_env`: `openenv validate`'s rules on a class in-process, over the shipped environments
and deliberately broken classes (the probe environment with one thing wrong)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fixtures.envs import ProbeEnv, ProbeObservation

from openenv_sdk import EnvCheckError, Environment, EnvironmentDefinitionError, check_env, create_app, tool
from openenv_sdk.checks import (
    CLASS_CHECKS,
    EnvCheckWarning,
    EnvClass,
    EnvFolder,
    run_class_checks,
    run_static_checks,
    validate_url,
)
from openenv_sdk.loader import load_environment
from openenv_sdk.tasks import TaskRecord
from openenv_sdk.testing import serve_app
from openenv_sdk.types import ORCHESTRATOR_TOKEN_VAR

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.parent.name for p in (REPO / "environments").glob("*/openenv.yaml"))


def failed(error: EnvCheckError) -> list[str]:
    return [result.name for result in error.report.checks if result.fatal]


# --- the shipped environments --------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_environment_passes(name: str) -> None:
    env_cls = load_environment(REPO / "environments" / name).env_cls
    report = check_env(env_cls)
    assert report.kind == "class" and report.passed
    assert report.summary["pass"] == len(report.checks)  # no warning, no skip, no missing extension
    names = [result.name for result in report.checks]
    assert {"environment.subclass", "tools.schemas", "server.start", "ws.reset", "ws.step", "ws.close",
            "ext.mcp_client"} <= set(names)


def test_the_rules_are_the_ones_openenv_validate_runs() -> None:
    """One rule set: `check_env` gives the very class results that `openenv validate` reports for
    the folder, and the very protocol results that `openenv validate --url` reports for its server."""
    folder = REPO / "environments" / "echo"
    with EnvFolder(folder) as env:
        from_folder = {r.name: r for r in run_static_checks(env)}
        env_cls = env.environment_class()
        from_class = list(run_class_checks(EnvClass(env_cls)))
    assert [r.name for r in from_class] == [r.name for r in (check(EnvClass(env_cls)) for check in CLASS_CHECKS)]
    assert from_class == [from_folder[r.name] for r in from_class]
    report = check_env(env_cls)
    with serve_app(create_app(env_cls)) as url:
        over_url = validate_url(url, strict_extensions=True)
    runtime = report.checks[len(CLASS_CHECKS) + 1:]
    assert report.checks[len(CLASS_CHECKS)].name == "server.start"
    assert [(r.name, r.status) for r in runtime] == [(r.name, r.status) for r in over_url.checks]


def test_skip_runtime_serves_nothing() -> None:
    report = check_env(ProbeEnv, skip_runtime=True)
    assert [r.name for r in report.checks] == [
        "environment.subclass", "environment.models", "environment.step", "tools.schemas", "tools.descriptions",
        "tools.reserved_names", "tools.declared", "environment.tasks",
    ]  # fmt: skip


def test_the_orchestrator_token_of_this_process_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ORCHESTRATOR_TOKEN_VAR, "kept-for-the-real-server")
    assert check_env(ProbeEnv).passed
    assert os.environ[ORCHESTRATOR_TOKEN_VAR] == "kept-for-the-real-server"


# --- broken classes ------------------------------------------------------------------------


def test_not_a_class_fails_with_the_fix() -> None:
    with pytest.raises(EnvCheckError) as caught:
        check_env(42)
    assert str(caught.value) == (
        "42 breaks 1 rule(s):\n"
        "  - environment.subclass: 42 is not an openenv_sdk.Environment subclass. "
        "Fix: Define it as `class MyEnv(Environment[MyAction, MyObservation, MyState])`"
    )
    assert failed(caught.value) == ["environment.subclass"]
    assert caught.value.report.checks[-1].name == "server.start" and caught.value.report.checks[-1].skipped


def test_an_instance_is_told_to_pass_the_class() -> None:
    with pytest.raises(EnvCheckError, match=r"is an instance, not the class\. Fix: Pass the class itself: ProbeEnv, not ProbeEnv\(\)"):
        check_env(ProbeEnv())


def test_the_error_is_an_environment_definition_error() -> None:
    with pytest.raises(EnvironmentDefinitionError):
        check_env(object)


class Inert(Environment):
    """Neither step() nor tools: no action can do anything."""


def test_no_step_and_no_tools_fails_statically_and_is_not_served() -> None:
    with pytest.raises(EnvCheckError) as caught:
        check_env(Inert)
    assert failed(caught.value) == ["environment.step"]
    assert "environment.step: Inert has no step() and no @tool methods: no action can do anything. " \
           "Fix: Implement step(self, action), or mark the agent's tools with @tool" in str(caught.value)
    assert [r.name for r in caught.value.report.checks if r.skipped] == ["server.start"]


class ResetRaises(ProbeEnv):
    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> ProbeObservation:
        raise RuntimeError("the dataset is missing")


def test_a_failing_reset_names_every_rule_it_breaks_at_runtime() -> None:
    assert check_env(ResetRaises, skip_runtime=True).passed  # statically it is fine
    with pytest.raises(EnvCheckError) as caught:
        check_env(ResetRaises)
    message = str(caught.value)
    assert message.startswith(f"{__name__}.ResetRaises breaks 3 rule(s):\n")
    assert failed(caught.value) == ["ws.reset", "ws.step", "ws.invalid_action"]
    for name in failed(caught.value):
        assert f"  - {name}: " in message
    assert "reset failed: [EXECUTION_ERROR]" in message and "the dataset is missing" in message


class ToolWithoutDocstring(ProbeEnv):
    @tool
    def shout(self, text: str) -> str:
        return text.upper()


def test_a_tool_without_a_description_warns_and_passes() -> None:
    with pytest.warns(EnvCheckWarning) as record:
        report = check_env(ToolWithoutDocstring, skip_runtime=True)
    assert report.passed
    assert [str(w.message) for w in record] == [
        "tools.descriptions: tool(s) without a description: shout. Fix: Give each tool a docstring "
        "(its first paragraph is the description; `Args:` documents parameters)"
    ]


class BrokenTasks(ProbeEnv):
    @classmethod
    def tasks(cls) -> Sequence[TaskRecord]:
        return [TaskRecord(id="one", split="train"), TaskRecord(id="one", split="train")]


def test_duplicate_task_ids_fail() -> None:
    with pytest.raises(EnvCheckError) as caught:
        check_env(BrokenTasks, skip_runtime=True)
    assert failed(caught.value) == ["environment.tasks"]
    assert "environment.tasks: BrokenTasks.tasks(): " in str(caught.value)


@pytest.mark.parametrize("option", ["timeout_s", "startup_timeout_s"])
def test_timeouts_must_be_positive(option: str) -> None:
    with pytest.raises(ValueError, match=f"{option} must be positive, got 0"):
        check_env(ProbeEnv, **{option: 0})


# --- create_app runs the same class rules ------------------------------------------------------


@pytest.mark.parametrize(("env_cls", "rule"), [(Inert, "environment.step"), (BrokenTasks, "environment.tasks")])
def test_create_app_refuses_a_class_that_breaks_a_rule(env_cls: type, rule: str) -> None:
    with pytest.raises(EnvCheckError) as caught:
        create_app(env_cls)
    assert failed(caught.value) == [rule]
    assert str(caught.value).startswith(f"create_app: {__name__}.{env_cls.__qualname__} breaks 1 rule(s):\n  - {rule}: ")


def test_create_app_logs_advice_and_serves(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="openenv_sdk.server"):
        app = create_app(ToolWithoutDocstring)
    assert app is not None
    assert [r.getMessage() for r in caplog.records if r.name == "openenv_sdk.server"] == [
        "tools.descriptions: tool(s) without a description: shout. Fix: Give each tool a docstring "
        "(its first paragraph is the description; `Args:` documents parameters)"
    ]
