"""`openenv_sdk.failures`: the causes, the sandbox's own signal that the host killed it, and what a
policy cannot forge (its own kill of its command is a result; a failure is the host's doing)."""

from __future__ import annotations

import threading
import time

import pytest

from openenv_sdk import Environment, GenericEnvClient, create_app, grade, orchestrator, tool
from openenv_sdk.errors import (
    EpisodeFailed,
    ExecutionError,
    InvalidActionError,
    RequestTimeout,
    SandboxError,
    SandboxKilled,
    TransportError,
)
from openenv_sdk.failures import EXCLUDED_CAUSES, Failure, FailureCause, classify
from openenv_sdk.sandbox import Sandbox
from openenv_sdk.testing import serve_app


@pytest.mark.parametrize(
    ("error", "stage", "cause"),
    [
        (RuntimeError("boom"), "reset", FailureCause.RESET),
        (ExecutionError("reset raised ValueError: no such task", code="EXECUTION_ERROR"), "reset", FailureCause.RESET),
        (RequestTimeout("no answer within 5 s"), "reset", FailureCause.TIMEOUT),
        (TimeoutError(), "episode", FailureCause.TIMEOUT),
        (SandboxError("this sandbox is closed"), "grading", FailureCause.SANDBOX),
        (
            ExecutionError("check raised SandboxKilled: the sandbox was killed", code="EXECUTION_ERROR"),
            "grading",
            FailureCause.SANDBOX,
        ),
        (TransportError("the connection closed"), "grading", FailureCause.INFRASTRUCTURE),
        (InvalidActionError("unknown call 'chek'", code="UNKNOWN_CALL"), "grading", FailureCause.GRADER),
        (KeyError("target"), "grading", FailureCause.GRADER),
        (KeyError("target"), "episode", FailureCause.INFRASTRUCTURE),
    ],
)
def test_classify_names_the_cause(error: BaseException, stage: str, cause: FailureCause) -> None:
    failure = classify(error, stage=stage)  # type: ignore[arg-type]
    assert (failure.cause, failure.stage, failure.error_type) == (cause, stage, type(error).__name__)
    assert failure.excluded


def test_a_message_the_agent_wrote_is_not_a_sandbox_failure() -> None:
    # The server's text puts the method and the class first; an agent's text comes after them.
    forged = ExecutionError("check raised ValueError: x raised SandboxKilled: y", code="EXECUTION_ERROR")
    assert classify(forged, stage="grading").cause == FailureCause.INFRASTRUCTURE


def test_failure_is_a_wire_model_and_policy_timeout_is_no_exclusion() -> None:
    failure = Failure(cause=FailureCause.JUDGE, stage="grading", message="HTTP 500")
    assert Failure.model_validate_json(failure.model_dump_json()) == failure
    assert failure.model_dump(mode="json")["cause"] == "judge"
    assert FailureCause.POLICY_TIMEOUT not in EXCLUDED_CAUSES
    assert not Failure(cause=FailureCause.POLICY_TIMEOUT, stage="episode", message="no turns left").excluded
    assert str(EpisodeFailed(failure)) == "judge failure at grading: HTTP 500"


def test_a_sandbox_the_host_kills_mid_command_raises_and_the_commands_own_kill_does_not() -> None:
    with Sandbox() as sandbox:
        killer = threading.Timer(0.3, sandbox.kill_all)
        killer.start()
        started = time.monotonic()
        with pytest.raises(SandboxKilled, match="the sandbox was killed while the command ran"):
            sandbox.run("sleep 20; echo never")
        assert time.monotonic() - started < 15
        killer.join()
        # The command killing itself (as a policy's program may) is its result, not the host's kill.
        result = sandbox.run("kill -9 $$")
        assert result.exit_code in (-9, 137)
        assert sandbox.run("echo alive").stdout == "alive\n"  # the sandbox goes on after a kill


class Checked(Environment):
    """An orchestrator call whose sandbox the host kills while it runs."""

    @tool
    def noop(self) -> str:
        """Do nothing."""
        return "ok"

    @orchestrator
    def check(self) -> str:
        with Sandbox() as sandbox:
            threading.Timer(0.3, sandbox.kill_all).start()
            return sandbox.run("sleep 20").stdout


def test_grading_over_a_killed_sandbox_is_a_sandbox_failure_not_a_zero() -> None:
    def grader(env: GenericEnvClient) -> float:
        return float(env.call("check") == "ok")

    with serve_app(create_app(Checked)) as url, GenericEnvClient(url) as env:
        env.reset()
        with pytest.raises(EpisodeFailed) as caught:
            grade(grader, env)
    assert caught.value.failure.cause == FailureCause.SANDBOX and caught.value.failure.stage == "grading"
    assert "SandboxKilled" in caught.value.failure.message
