"""Replays through a real server: every task's reference solution scores exactly 1.0 and a null
attempt exactly 0.0, several sessions in parallel (threads) against one server.

The agent's side goes through the tools as an agent would (MCP `tools/call`, or tool-call
actions through `step`); the reward is computed host-side by `CodingGrader`. With
`OPENENV_TEST_CONTAINERS=1` the same replay runs against the image built by `openenv build`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from coding_support import CODING_DIR, coding_env, connect, reference, tool_text

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.providers import DockerProvider
from openenv_sdk.rubric import grade

TASKS = coding_env.load_tasks()
DIFFICULTIES = ["easy", "medium", "hard"]
THREADS = 4


def _reference_attempt(env: GenericEnvClient, task_id: str) -> None:
    """What a perfect agent does: read the stub, write the solution, run it, submit."""
    first = env.reset(task_id=task_id).observation
    solution_file = first["solution_file"]
    assert "NotImplementedError" in tool_text(env.call_tool("read_file", path=solution_file))
    written = env.call_tool("write_file", path=solution_file, content=reference(task_id))
    assert not written.is_error and tool_text(written).startswith("Wrote ")
    module = solution_file.removesuffix(".py")
    ran = env.step({"tool": "run_python", "arguments": {"code": f"import {module}\nprint('ok')"}})
    assert ran.observation["result"]["content"][0]["text"] == "ok\n[exit code 0]"
    assert env.step({"tool": "submit", "arguments": {}}).done


def _null_attempt(env: GenericEnvClient, task_id: str) -> None:
    """An agent that does nothing: the stub stays as it was."""
    env.reset(task_id=task_id)
    assert env.step({"tool": "submit", "arguments": {}}).done


ATTEMPTS = {"reference": (_reference_attempt, 1.0), "null": (_null_attempt, 0.0)}


def _replay(owner: GenericEnvClient, grader: Any, jobs: list[tuple[str, str]]) -> list[tuple[str, str, Any]]:
    """Run `jobs` ((task_id, attempt) pairs) on THREADS sessions at once; one client per thread."""
    chunks = [jobs[i::THREADS] for i in range(THREADS)]

    def worker(chunk: list[tuple[str, str]]) -> list[tuple[str, str, Any]]:
        out = []
        with connect(owner) as env:
            for task_id, attempt in chunk:
                ATTEMPTS[attempt][0](env, task_id)
                out.append((task_id, attempt, grade(grader, env)))
        return out

    with ThreadPoolExecutor(THREADS) as pool:
        return [result for chunk in pool.map(worker, chunks) for result in chunk]


def _jobs(difficulty: str) -> list[tuple[str, str]]:
    return [(task_id, attempt) for task_id, t in TASKS.items() if t.difficulty == difficulty for attempt in ATTEMPTS]


def _check(results: list[tuple[str, str, Any]], difficulty: str) -> None:
    assert sorted((t, a) for t, a, _ in results) == sorted(_jobs(difficulty))
    wrong = {
        f"{task_id}/{attempt}": {
            k: score.evidence[k] for k in ("passed", "total", "failures", "collect_errors", "output_tail")
        }
        for task_id, attempt, score in results
        if score.value != ATTEMPTS[attempt][1]
    }
    assert not wrong, wrong
    for task_id, attempt, score in results:
        tests = score.evidence["tests"]
        if attempt == "reference":
            assert score.components["partial"] == 1.0 and set(tests.values()) == {"passed"}, task_id
        else:
            assert score.components["partial"] == 0.0 and "passed" not in tests.values(), task_id


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_every_reference_scores_one_and_every_null_attempt_zero(
    coding_server: GenericEnvClient, grader: Any, difficulty: str
) -> None:
    _check(_replay(coding_server, grader, _jobs(difficulty)), difficulty)


@pytest.mark.parametrize("how", ["empty file", "no file"])
def test_an_empty_or_missing_solution_scores_zero(session: GenericEnvClient, grader: Any, how: str) -> None:
    session.reset(task_id="lru_cache")
    command = ": > lru_cache.py" if how == "empty file" else "rm lru_cache.py"
    assert tool_text(session.call_tool("run_shell", command=command)) == "[exit code 0]"
    score = grade(grader, session)
    assert score.value == 0.0 and score.evidence["passed"] == 0
    assert score.evidence["solution_file"] == {"lru_cache.py": "copied" if how == "empty file" else "missing"}


# --- the same replay against the image ---------------------------------------------------------------


@pytest.fixture(scope="module")
def coding_image() -> Iterator[str]:
    if os.environ.get("OPENENV_TEST_CONTAINERS") != "1":
        pytest.skip("container tests need OPENENV_TEST_CONTAINERS=1 and a container engine")
    from openenv_sdk.build import build_image

    yield build_image(CODING_DIR, tag="openenv-coding-test:latest", output="quiet")


@pytest.fixture(scope="module")
def image_server(coding_image: str) -> Iterator[GenericEnvClient]:
    with GenericEnvClient(image=coding_image, startup_timeout_s=120) as owner:
        yield owner


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_container_replay(image_server: GenericEnvClient, grader: Any, difficulty: str) -> None:
    _check(_replay(image_server, grader, _jobs(difficulty)), difficulty)


def test_container_holds_no_hidden_data_and_isolates_commands(image_server: GenericEnvClient) -> None:
    """In the image, the agent's sandbox sees neither the environment folder (/env) nor the
    server's process, and the image itself carries no hidden data."""
    image_server.reset(task_id="fizzbuzz")
    listing = tool_text(image_server.call_tool("run_shell", command="ls -A /env; echo; id -un; ps -e -o comm="))
    assert "No such file or directory" in listing and "coding_env.py" not in listing, listing
    assert "openenv" not in listing and "uvicorn" not in listing, f"the server is visible: {listing}"
    import docker

    provider = image_server.provider
    assert isinstance(provider, DockerProvider) and provider.container_id is not None
    container = docker.from_env().containers.get(provider.container_id)
    found = container.exec_run(["sh", "-c", "ls -A /env; ls /env/tasks | wc -l"]).output.decode()
    assert "coding_env.py" in found and str(len(TASKS)) in found
    assert "hidden" not in found.split() and "tests" not in found.split(), f"the image has hidden data: {found}"
    assert tool_text(image_server.call_tool("run_shell", command="echo alive")) == "alive\n[exit code 0]"
