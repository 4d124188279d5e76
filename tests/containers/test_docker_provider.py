"""DockerProvider against a real engine: limits, network policy, failure detection, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from openenv_sdk.build import build_image
from openenv_sdk.containers.errors import ContainerExitedError, ContainerRunError, StartupTimeoutError
from openenv_sdk.containers.labels import LABEL_MANAGED
from openenv_sdk.errors import ProviderError
from openenv_sdk.providers import DockerProvider

from .conftest import REPO, make_env_dir, requires_engine

pytestmark = requires_engine


def _host_config(provider: DockerProvider) -> dict:
    container = provider._container
    assert container is not None
    container.reload()
    return container.attrs["HostConfig"]


def test_limits_come_from_the_image_manifest(probe_image: str) -> None:
    with DockerProvider(probe_image) as provider:
        config = _host_config(provider)
        assert config["Memory"] == 256 * 1024**2
        assert config["NanoCpus"] == 500_000_000
        assert config["PidsLimit"] == 64
        assert httpx.get(f"{provider.base_url}/env", timeout=5).text == "hello"


def test_arguments_override_the_manifest(probe_image: str) -> None:
    with DockerProvider(
        probe_image, mem_limit="128m", cpus=0.25, pids_limit=32, env={"PROBE_GREETING": "hi"}
    ) as provider:
        config = _host_config(provider)
        assert (config["Memory"], config["NanoCpus"], config["PidsLimit"]) == (128 * 1024**2, 250_000_000, 32)
        assert httpx.get(f"{provider.base_url}/env", timeout=5).text == "hi"


def test_network_none_serves_but_blocks_egress(probe_image: str) -> None:
    with DockerProvider(probe_image, network="none") as provider:
        assert httpx.get(f"{provider.base_url}/health", timeout=5).status_code == 200
        assert httpx.get(f"{provider.base_url}/egress", timeout=10).text.startswith("egress-blocked")


def test_network_bridge_publishes_on_loopback(probe_image: str) -> None:
    with DockerProvider(probe_image, network="bridge") as provider:
        assert provider.base_url is not None and provider.base_url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{provider.base_url}/health", timeout=5).status_code == 200


def test_read_only_root(probe_image: str) -> None:
    with DockerProvider(probe_image, read_only=True) as provider:
        container = provider._container
        assert container is not None
        assert container.exec_run(["sh", "-c", "touch /srv/x"]).exit_code != 0
        assert container.exec_run(["sh", "-c", "touch /tmp/x"]).exit_code == 0


def test_stop_removes_the_container(engine, probe_image: str) -> None:
    provider = DockerProvider(probe_image)
    provider.start()
    container_id = provider.container_id
    assert container_id is not None
    provider.stop()
    assert not provider.is_alive()
    assert not engine.containers.list(all=True, filters={"id": container_id})
    provider.stop()  # twice is fine


def test_a_killed_container_is_detected(probe_image: str) -> None:
    with DockerProvider(probe_image) as provider:
        assert provider.is_alive()
        container = provider._container
        assert container is not None
        container.kill()
        deadline = time.monotonic() + 10
        while provider.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not provider.is_alive()
        with pytest.raises(ContainerExitedError) as info:
            provider.check_alive()
        assert info.value.exit_code == 137


def test_a_crashing_server_raises_with_its_log(engine, tmp_path: Path) -> None:
    folder = make_env_dir(
        tmp_path / "crash",
        dockerfile="FROM @BASE@\n"
        'CMD ["python3", "-c", "import sys; print(\'starting\'); sys.exit(\'boom: bad config\')"]\n',
    )
    tag = build_image(folder, tag="openenv-test-crash:latest", engine=engine, output="quiet")
    provider = DockerProvider(tag, startup_timeout_s=30)
    with pytest.raises(ContainerExitedError) as info:
        provider.start()
    assert isinstance(info.value, ProviderError)
    assert info.value.exit_code == 1
    assert any("boom: bad config" in line for line in info.value.log_tail)
    assert "boom: bad config" in str(info.value)
    assert provider.container_id is None  # removed


def test_a_server_that_never_gets_healthy_times_out(engine, tmp_path: Path) -> None:
    folder = make_env_dir(tmp_path / "mute", dockerfile='FROM @BASE@\nCMD ["sleep", "600"]\n')
    tag = build_image(folder, tag="openenv-test-mute:latest", engine=engine, output="quiet")
    started = time.monotonic()
    with pytest.raises(StartupTimeoutError, match="startup_timeout_s"):
        DockerProvider(tag, startup_timeout_s=2).start()
    assert time.monotonic() - started < 20


def test_a_missing_image_says_how_to_build_it() -> None:
    with pytest.raises(ContainerRunError, match="build it first"):
        DockerProvider("openenv-test-does-not-exist:latest").start()


def _run_owner(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _containers_of(engine, pid: int) -> list:
    return engine.containers.list(all=True, filters={"label": [f"{LABEL_MANAGED}=1", f"org.openenv.owner-pid={pid}"]})


def test_containers_are_removed_at_interpreter_exit(engine, probe_image: str) -> None:
    owner = _run_owner(f"""
        from openenv_sdk.providers import DockerProvider
        provider = DockerProvider({probe_image!r})
        print(provider.start(), flush=True)
        # exits without stop(): atexit removes the container
    """)
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0 and out.startswith("http://")
    assert _containers_of(engine, owner.pid) == []


def test_containers_are_removed_on_ctrl_c(engine, probe_image: str) -> None:
    owner = _run_owner(f"""
        import time
        from openenv_sdk.providers import DockerProvider
        with DockerProvider({probe_image!r}) as provider:
            print(provider.base_url, flush=True)
            time.sleep(60)
    """)
    assert owner.stdout is not None
    assert owner.stdout.readline().startswith("http://")
    assert len(_containers_of(engine, owner.pid)) == 1
    owner.send_signal(signal.SIGINT)
    owner.communicate(timeout=30)
    assert _containers_of(engine, owner.pid) == []
