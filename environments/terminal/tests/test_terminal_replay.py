"""Every task's reference solution scores exactly 1.0 and its null attempt 0.0, replayed through
the agent's MCP `bash` tool and graded host-side, with several sessions at once on one server.

The same replay runs against the environment's image when OPENENV_TEST_CONTAINERS=1.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from terminal_testkit import ENV_DIR, client_of, describe_failures, replay_in_parallel, terminal_env

from openenv_sdk.client import GenericEnvClient

WANT = {"solution": 1.0, "null": 0.0}
JOBS = [(task_id, kind) for task_id in terminal_env.task_ids() for kind in ("solution", "null")]


def test_every_reference_solution_passes_and_every_null_attempt_fails() -> None:
    started = time.monotonic()
    with GenericEnvClient(env_dir=ENV_DIR) as owner:
        assert owner.base_url is not None
        outcomes = replay_in_parallel(lambda: client_of(owner), JOBS, threads=4)
        health = owner.schema()  # the server is still serving after the replay
        assert [tool.name for tool in health.tools] == ["bash", "read_file", "write_file", "submit"]
    assert len(outcomes) == len(JOBS) >= 60
    assert describe_failures(outcomes, WANT) == []
    assert [o for o in outcomes if o.kind == "solution" and o.tool_errors] == []
    assert time.monotonic() - started < 110


@pytest.fixture(scope="module")
def image() -> str:
    if os.environ.get("OPENENV_TEST_CONTAINERS") != "1":
        pytest.skip("container tests are off (set OPENENV_TEST_CONTAINERS=1 with a container engine)")
    from openenv_sdk.build import build_image

    return build_image(ENV_DIR, output="quiet")


@pytest.mark.timeout(1200)
def test_the_replay_passes_in_the_image_too(image: str) -> None:
    with GenericEnvClient(image=image) as owner:
        if owner.base_url is None:
            owner.connect()
        outcomes = replay_in_parallel(lambda: client_of(owner), JOBS, threads=4)
    assert describe_failures(outcomes, WANT) == []


@pytest.mark.timeout(1200)
def test_the_image_holds_no_hidden_file_and_commands_run_unprivileged(image: str) -> None:
    with GenericEnvClient(image=image) as client:
        client.reset(task_id="count_log_files")

        def bash(command: str) -> str:
            return client.call_tool("bash", command=command).content[0].text

        assert bash("id -un").splitlines()[0] == "agent"
        found = bash(
            "grep -rlF '__failed=$((__failed + 1))' / --exclude-dir=proc --exclude-dir=sys "
            "--exclude-dir=dev 2>/dev/null | head; echo done"
        )
        assert found.splitlines()[0] == "done", found
        assert "Operation not permitted" in bash("kill -9 1")
