"""What openenv started, by label, against a real engine: a container left by a SIGKILLed owner
(a killed Jupyter kernel) is listed as orphaned and removed by `openenv containers clean`, a
live owner's is kept; an image that is not an environment's says so when it exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.containers.errors import ContainerExitedError
from openenv_sdk.containers.labels import LABEL_OWNER_PID
from openenv_sdk.providers import DockerProvider

from .conftest import TEST_BASE_IMAGE, requires_engine

pytestmark = requires_engine
runner = CliRunner()


def _cli(*args: str) -> dict:
    result = runner.invoke(app, ["containers", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def killed_owner(engine, probe_image: str) -> Iterator[int]:
    """The pid of a process that started a container and was then SIGKILLed (no atexit ran)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from openenv_sdk.providers import DockerProvider
            provider = DockerProvider({probe_image!r})
            print(provider.start(), flush=True)
            time.sleep(120)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    assert owner.stdout is not None
    try:
        assert owner.stdout.readline().startswith("http://")
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        owner.stdout.close()
    yield owner.pid
    for container in engine.containers.list(all=True, filters={"label": [f"{LABEL_OWNER_PID}={owner.pid}"]}):
        container.remove(force=True)  # only if the test failed before its clean


def test_a_killed_owners_container_is_listed_orphaned_and_cleaned(killed_owner: int, probe_image: str) -> None:
    only_it = ["--label", f"{LABEL_OWNER_PID}={killed_owner}"]
    [listed] = _cli("list", *only_it)["containers"]
    assert (listed["owner_pid"], listed["orphaned"], listed["status"]) == (killed_owner, True, "running")
    assert listed["environment"] == "probe"
    assert listed["image"] == probe_image  # as asked for, not another tag of the same image
    assert _cli("clean", "--dry-run", *only_it) == {"removed": [], "would_remove": [listed["id"]], "kept": []}
    assert _cli("list", *only_it)["containers"] != []
    assert _cli("clean", *only_it) == {"removed": [listed["id"]], "would_remove": [], "kept": []}
    assert _cli("list", *only_it)["containers"] == []


def test_a_live_owners_container_is_kept_unless_all(probe_image: str) -> None:
    only_mine = ["--label", f"{LABEL_OWNER_PID}={os.getpid()}"]
    with DockerProvider(probe_image) as provider:
        container_id = (provider.container_id or "")[:12]
        [listed] = _cli("list", *only_mine)["containers"]
        assert (listed["id"], listed["orphaned"]) == (container_id, False)
        assert _cli("clean", *only_mine) == {"removed": [], "would_remove": [], "kept": [container_id]}
        assert provider.is_alive()
        assert _cli("clean", "--all", *only_mine) == {"removed": [container_id], "would_remove": [], "kept": []}
        assert not provider.is_alive()


def test_the_human_listing_names_the_orphans(killed_owner: int) -> None:
    result = runner.invoke(app, ["containers", "list", "--label", f"{LABEL_OWNER_PID}={killed_owner}"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert str(killed_owner) in result.stdout and "yes" in result.stdout
    assert "1 orphaned: remove them with `openenv containers clean`" in result.stdout


def test_an_image_that_is_not_an_environment_says_so() -> None:
    """The bare base image's command (bash, no terminal) exits 0 at once and prints nothing."""
    with pytest.raises(ContainerExitedError) as raised:
        DockerProvider(TEST_BASE_IMAGE, startup_timeout_s=60).start()
    message = str(raised.value)
    assert message.startswith(f"container of {TEST_BASE_IMAGE!r} exited (status 0) without serving /health; "
                              "it is probably not an openenv image (no org.openenv.manifest label")
    assert "openenv build ENV_DIR" in message
    assert message.endswith("it printed nothing")
    assert "last log lines:" not in message
