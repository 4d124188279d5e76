"""`EnvClient` against real servers on loopback ports."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from fixtures.envs import ProbeAction, ProbeEnv, ProbeObservation, probe_factory
from fixtures.servers import serve

import openenv_sdk.client
from openenv_sdk import ServerConfig, create_app
from openenv_sdk.client import EnvClient, StepResult, Trajectory
from openenv_sdk.errors import (
    CapacityError,
    ClientStateError,
    InvalidActionError,
    RequestTimeout,
    SessionError,
    TransportError,
)
from openenv_sdk.types import CallToolObservation, ListToolsAction, ListToolsObservation, ToolCallAction


def test_exported_members() -> None:
    assert openenv_sdk.client.__all__ == [
        "DEFAULT_CONNECT_TIMEOUT_S",
        "DEFAULT_STARTUP_TIMEOUT_S",
        "DEFAULT_TIMEOUT_S",
        "AsyncEnvClient",
        "AsyncGenericEnvClient",
        "ClientOptions",
        "EnvClient",
        "GenericEnvClient",
        "StepResult",
        "Trajectory",
        "TrajectoryStep",
    ]
    for name in openenv_sdk.client.__all__:
        assert getattr(openenv_sdk.client, name) is not None


def test_reset_step_state_are_typed_by_env_cls(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        first = env.reset(seed=7)
        assert isinstance(first, StepResult)
        assert isinstance(first.observation, echo_module.EchoObservation)
        assert first.observation.echoed_message == "Echo environment ready!"
        assert (first.reward, first.done) == (None, False)

        result = env.step(echo_module.EchoAction(message="hello"))
        assert result.observation.echoed_message == "hello"
        assert result.observation.message_length == 5
        assert result.reward == pytest.approx(0.5)
        assert result.observation.reward == result.reward

        state = env.state()
        assert isinstance(state, echo_module.EchoState)
        assert (state.episode_id, state.step_count, state.messages) == ("echo-7", 1, ["hello"])


def test_type_parameters_type_the_client(echo_server: str, echo_module: ModuleType) -> None:
    m = echo_module
    with EnvClient[m.EchoAction, m.EchoObservation, m.EchoState](echo_server) as env:
        env.reset()
        assert isinstance(env.step({"message": "hi"}).observation, m.EchoObservation)
        assert isinstance(env.state(), m.EchoState)


def test_an_untyped_client_says_how_to_type_it(echo_server: str) -> None:
    with EnvClient(echo_server) as env:
        with pytest.raises(TypeError, match=r"EnvClient\[MyAction, MyObservation, MyState\].*GenericEnvClient"):
            env.reset()


def test_dict_actions_are_checked_before_sending(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.step({"messag": "x"})
        assert str(caught.value) == (
            "[VALIDATION_ERROR] Invalid action for EchoAction: action.message: Field required; "
            "action.messag: Extra inputs are not permitted"
        )
        assert caught.value.code == "VALIDATION_ERROR"
        assert [e["loc"] for e in caught.value.details["errors"]] == [["action", "message"], ["action", "messag"]]
        assert env.state().step_count == 0  # nothing reached the server
        with pytest.raises(TypeError, match="step\\(\\) takes a EchoAction"):
            env.step(42)


def test_tool_call_actions_return_tool_observations(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        called = env.step(ToolCallAction(tool="echo", arguments={"message": "via step"}))
        assert isinstance(called.observation, CallToolObservation)
        assert called.observation.result is not None and called.observation.result["data"] == "via step"
        as_dict = env.step({"tool": "echo", "arguments": {"message": "again"}})
        assert isinstance(as_dict.observation, CallToolObservation)
        listed = env.step(ListToolsAction())
        assert isinstance(listed.observation, ListToolsObservation)
        assert [t.name for t in listed.observation.tools] == ["echo"]
        assert [c["output"] for c in env.call("transcript")] == ["via step", "again"]


def test_server_errors_raise_the_matching_error(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.call("grade")
        assert caught.value.code == "UNKNOWN_CALL"
        assert str(caught.value) == "[UNKNOWN_CALL] Unknown orchestrator call 'grade'. Available: ['transcript']"
        assert env.step({"message": "still here"}).observation.echoed_message == "still here"


def test_capacity_error_when_the_server_is_full(serve_echo: Callable[..., str], echo_module: ModuleType) -> None:
    url = serve_echo(max_sessions=1)
    with EnvClient(url, env_cls=echo_module.EchoEnvironment) as first:
        first.reset()
        second = EnvClient(url, env_cls=echo_module.EchoEnvironment)
        with pytest.raises(CapacityError) as caught:
            second.reset()
        assert caught.value.code == "CAPACITY_REACHED"
        assert caught.value.details == {"active_sessions": 1, "max_sessions": 1}
        second.close()
        assert first.step({"message": "ok"}).observation.echoed_message == "ok"


def test_a_closed_client_refuses_reuse(echo_server: str, echo_module: ModuleType) -> None:
    env = EnvClient(echo_server, env_cls=echo_module.EchoEnvironment)
    with env:
        env.reset()
    assert env.is_closed
    env.close()  # twice is fine
    for use in (env.reset, env.state, env.session, env.connect, env.reconnect, lambda: env.step({"message": "x"})):
        with pytest.raises(ClientStateError, match="This EnvClient is closed; create a new client"):
            use()
    with pytest.raises(ClientStateError):
        env.__enter__()


def test_session_and_mcp_url(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        info = env.session()
        assert info.mcp_path == "/mcp"
        assert env.mcp_url == f"{echo_server}/mcp?session={info.mcp_token}"
        assert env.session() == info


def test_trajectory_records_the_episode(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        assert env.trajectory == Trajectory()
        env.reset(seed=1, task_id="t-1")
        env.step({"message": "ab"})
        env.step(echo_module.EchoAction(message="abcd"))
        trajectory = env.trajectory
        assert trajectory.task == {"seed": 1, "task_id": "t-1"}
        assert trajectory.actions == [{"metadata": {}, "message": "ab"}, {"metadata": {}, "message": "abcd"}]
        assert [o["echoed_message"] for o in trajectory.observations] == ["Echo environment ready!", "ab", "abcd"]
        assert trajectory.rewards == [pytest.approx(0.2), pytest.approx(0.4)]
        assert trajectory.total_reward == pytest.approx(0.6)
        assert not trajectory.done
        Trajectory.model_validate_json(trajectory.model_dump_json())  # graders can store it

        env.reset(seed=2)
        assert env.trajectory.task == {"seed": 2}
        assert env.trajectory.steps == []


def test_a_timed_out_request_does_not_shift_later_replies() -> None:
    def slow_step(env: ProbeEnv, action: ProbeAction) -> ProbeObservation:
        time.sleep(0.5)
        env.state.step_count += 1
        return ProbeObservation(echoed=action.message)

    with serve(create_app(ProbeEnv, factory=probe_factory(step_func=slow_step))) as url:
        with EnvClient(url, env_cls=ProbeEnv, timeout_s=0.2) as env:
            env.reset()
            with pytest.raises(RequestTimeout, match=r"No reply to 'step' from http://127\.0\.0\.1:\d+ within 0\.2 s"):
                env.step({"message": "late"})
            time.sleep(0.5)  # the late reply arrives; it must not answer the next request
            assert env.state().step_count == 1
            assert env.trajectory.steps == []


def test_a_reaped_session_is_reported_and_never_silently_continued(
    serve_echo: Callable[..., str], echo_module: ModuleType
) -> None:
    url = serve_echo(idle_timeout_s=0.2)
    with EnvClient(url, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        env.step({"message": "one"})
        old = env.session().session_id
        time.sleep(0.6)
        with pytest.raises(SessionError, match="reset\\(\\) starts a new episode|call reset\\(\\)") as caught:
            env.step({"message": "two"})
        assert "The episode was lost" in str(caught.value)
        with pytest.raises(SessionError, match="call reset\\(\\) to start a new episode"):
            env.state()  # still refused: the new session has no episode
        assert env.session().session_id != old
        env.reset()
        assert env.step({"message": "three"}).observation.echoed_message == "three"
        assert env.state().messages == ["three"]


def test_a_reset_after_the_server_closed_an_unreset_session_opens_a_new_one(
    serve_echo: Callable[..., str], echo_module: ModuleType
) -> None:
    """The server closes a session not reset within unreset_grace_s; the reset that comes later
    goes again on a new session instead of failing (nothing of an episode was lost)."""
    url = serve_echo(unreset_grace_s=0.2)
    with EnvClient(url, env_cls=echo_module.EchoEnvironment) as env:
        old = env.session().session_id
        time.sleep(0.8)
        env.reset()
        assert env.session().session_id != old
        assert env.step({"message": "after"}).observation.echoed_message == "after"
    with EnvClient(url, env_cls=echo_module.EchoEnvironment, auto_reconnect=False) as env:
        env.session()
        time.sleep(0.8)
        with pytest.raises(SessionError, match="unreset_grace_s"):
            env.reset()


def test_without_auto_reconnect_a_drop_asks_for_reconnect(
    serve_echo: Callable[..., str], echo_module: ModuleType
) -> None:
    url = serve_echo(idle_timeout_s=0.2)
    with EnvClient(url, env_cls=echo_module.EchoEnvironment, auto_reconnect=False) as env:
        env.reset()
        time.sleep(0.6)
        with pytest.raises(SessionError):
            env.step({"message": "two"})
        with pytest.raises(SessionError, match="auto_reconnect is off: call reconnect\\(\\)"):
            env.step({"message": "three"})
        assert env.reconnect() is not None
        env.reset()
        assert env.step({"message": "four"}).observation.echoed_message == "four"


def test_reconnect_opens_a_new_session_and_loses_the_episode(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        env.step({"message": "one"})
        old = env.session()
        new = env.reconnect()
        assert new is not None and new.session_id != old.session_id and new.mcp_token != old.mcp_token
        lost = r"The episode was lost: reconnect\(\) replaced the connection.*after 1 step"
        with pytest.raises(SessionError, match=lost):
            env.step({"message": "two"})
        env.reset()
        assert env.state().step_count == 0


def test_an_unreachable_server_is_a_transport_error(free_port: int, echo_module: ModuleType) -> None:
    env = EnvClient(f"http://127.0.0.1:{free_port}", env_cls=echo_module.EchoEnvironment, connect_timeout_s=2)
    with pytest.raises(TransportError, match=f"Could not connect to ws://127.0.0.1:{free_port}/ws"):
        env.reset()
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "EnvClient needs exactly one of base_url, env_dir=, image=, provider= \\(got none\\)"),
        ({"base_url": "http://x", "env_dir": "y"}, "\\(got base_url, env_dir\\)"),
        ({"base_url": "http://x", "timeout_s": 0}, "timeout_s must be a positive, finite number of seconds, got 0"),
        ({"base_url": "http://x", "connect_timeout_s": float("inf")}, "connect_timeout_s must be a positive"),
        ({"base_url": "ftp://x"}, "base_url must look like http://host:port, got 'ftp://x'"),
    ],
)
def test_constructor_checks(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EnvClient(**kwargs)


def test_restart_needs_a_provider(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        with pytest.raises(ClientStateError, match="restart\\(\\) needs a provider"):
            env.restart()


def test_ws_urls_are_accepted_as_base_url(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server.replace("http", "ws") + "/", env_cls=echo_module.EchoEnvironment) as env:
        assert env.base_url == echo_server
        assert env.reset().observation.echoed_message == "Echo environment ready!"


def test_default_timeouts_are_finite() -> None:
    config = ServerConfig()
    assert config.tool_timeout_s > 0
    assert 0 < openenv_sdk.client.DEFAULT_TIMEOUT_S < float("inf")
    assert 0 < openenv_sdk.client.DEFAULT_CONNECT_TIMEOUT_S < float("inf")


@pytest.fixture
def resetting_port() -> Iterator[int]:
    """A TCP port whose server resets every connection at once, mid-handshake (a node lost)."""
    import socket
    import struct
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()


def test_a_connection_reset_during_the_handshake_is_a_transport_error(resetting_port: int, echo_module: ModuleType) -> None:
    # seen when a Ray node died: websockets raised ConnectionClosedError out of connect()
    for _ in range(5):  # the reset lands before, during or after the request is written
        env = EnvClient(f"http://127.0.0.1:{resetting_port}", env_cls=echo_module.EchoEnvironment, connect_timeout_s=2)
        with pytest.raises(TransportError, match=f"Could not connect to ws://127.0.0.1:{resetting_port}/ws"):
            env.reset()
        env.close()
