"""`env_dir=`: the local process provider starts `openenv serve`, reports failures, leaks nothing."""

from __future__ import annotations

import gc
import os
import signal
import textwrap
import time
from pathlib import Path
from types import ModuleType

import httpx
import psutil
import pytest

from openenv_sdk.client import EnvClient, GenericEnvClient
from openenv_sdk.errors import ProviderError, SessionError, TransportError
from openenv_sdk.providers.local import LocalProcessProvider

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"


def _group_is_gone(pgid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = []
        for process in psutil.process_iter(["pid", "status"]):
            try:
                if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                    alive.append(process.pid)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _env_folder(tmp_path: Path, module_source: str, ref: str = "broken_env:Env") -> Path:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "openenv.yaml").write_text(
        textwrap.dedent(
            f"""\
            spec_version: 1
            name: broken
            version: 0.1.0
            description: An environment that cannot be served.
            type: space
            runtime: fastapi
            port: 8000
            environment: {ref}
            """
        )
    )
    (folder / "broken_env.py").write_text(textwrap.dedent(module_source))
    return folder


def test_env_dir_starts_and_stops_a_server(echo_module: ModuleType) -> None:
    with EnvClient(env_dir=ECHO_DIR, env_cls=echo_module.EchoEnvironment) as env:
        provider = env.provider
        assert isinstance(provider, LocalProcessProvider)
        pid = provider.pid
        assert pid is not None and psutil.pid_exists(pid)
        assert env.base_url == provider.base_url
        assert env.base_url is not None and env.base_url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{env.base_url}/health").json()["status"] == "healthy"
        env.reset()
        assert env.step({"message": "local"}).observation.echoed_message == "local"
    assert not provider.is_alive()
    assert provider.base_url is None
    assert _group_is_gone(pid)


def test_the_provider_on_its_own() -> None:
    provider = LocalProcessProvider(ECHO_DIR, startup_timeout_s=60)
    provider.stop()  # before start: nothing to do
    with provider:
        url = provider.base_url
        assert url is not None
        assert provider.start() == url  # started: the same server
        assert httpx.get(f"{url}/metadata").json()["name"] == "echo"
        pid = provider.pid
        assert pid is not None
    provider.stop()  # twice: fine
    assert _group_is_gone(pid)


def test_a_broken_env_folder_names_the_cause(tmp_path: Path) -> None:
    folder = _env_folder(tmp_path, "import not_a_real_module\n")
    env = GenericEnvClient(env_dir=folder, startup_timeout_s=60)
    with pytest.raises(ProviderError) as caught:
        env.reset()
    message = str(caught.value)
    assert f"openenv serve {folder} exited with code 1 before it became healthy" in message
    assert "No module named 'not_a_real_module'" in message
    provider = env.provider
    assert isinstance(provider, LocalProcessProvider) and provider.pid is None
    env.close()


def test_a_missing_folder_is_refused_at_once(tmp_path: Path) -> None:
    env = GenericEnvClient(env_dir=tmp_path / "nowhere")
    with pytest.raises(ProviderError, match=f"Cannot serve {tmp_path / 'nowhere'}: the folder does not exist"):
        env.connect()
    env.close()
    with pytest.raises(ProviderError, match="the folder has no openenv.yaml"):
        LocalProcessProvider(tmp_path).start()


def test_a_server_that_never_gets_healthy_is_killed(tmp_path: Path) -> None:
    folder = _env_folder(tmp_path, "import time\nprint('loading forever', flush=True)\ntime.sleep(60)\n")
    provider = LocalProcessProvider(folder, startup_timeout_s=5)
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        provider.start()
    assert time.monotonic() - started < 15
    assert "did not answer http://127.0.0.1:" in str(caught.value)
    assert "/health within 5 s (startup_timeout_s)" in str(caught.value)
    assert "loading forever" in str(caught.value)
    assert not provider.is_alive()


def test_a_dead_server_is_reported_and_restart_brings_a_fresh_one(echo_module: ModuleType) -> None:
    with EnvClient(env_dir=ECHO_DIR, env_cls=echo_module.EchoEnvironment, connect_timeout_s=2) as env:
        env.reset()
        env.step({"message": "before"})
        provider = env.provider
        assert isinstance(provider, LocalProcessProvider) and provider.pid is not None
        old_pid = provider.pid
        os.killpg(old_pid, signal.SIGKILL)
        assert _group_is_gone(old_pid)
        with pytest.raises(TransportError) as caught:
            env.step({"message": "after"})
        assert "LocalProcessProvider) is not running" in str(caught.value)
        assert "client.restart()" in str(caught.value)

        env.restart()
        assert provider.pid not in (None, old_pid)
        with pytest.raises(SessionError, match="call reset\\(\\) to start a new episode"):
            env.step({"message": "after restart"})
        env.reset()
        assert env.step({"message": "fresh"}).observation.echoed_message == "fresh"
        pid = provider.pid
    assert pid is not None and _group_is_gone(pid)


def test_a_forgotten_provider_is_stopped_when_collected() -> None:
    provider = LocalProcessProvider(ECHO_DIR)
    provider.start()
    pid = provider.pid
    assert pid is not None
    del provider
    gc.collect()
    assert _group_is_gone(pid)
