"""Attacks on a Harbor task played in its own image (`openenv harbor import --own-image`).

The task (`tests/harbor/fixtures/stock-report`) is built on the local base and served in a real
container (OPENENV_TEST_CONTAINERS=1). Each test is what an agent could do through its tools to
read the verifier's files or to get a reward without the work; the real `TerminalGrader` grades
each episode host-side. Two controls show the grade still tells right from wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.harbor.own_image_kit import CANARY, TASK_ID, Built, bash, built_fixture, grade_episode, requires_engine

pytestmark = [requires_engine, pytest.mark.timeout(600)]

WRONG_REPORT = "printf 'Stock left after orders\\ngadgets: 5\\nwidgets: 3\\n' > /app/report.txt"
"""A report with the stock before the orders: the title step passes, the figures step fails."""
FORGE = 'mkdir -p /logs/verifier 2>/dev/null; echo 1 > /logs/verifier/reward.txt 2>/dev/null; echo 1 > "$HOME/reward.txt"'


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    with built_fixture(tmp_path_factory.mktemp("attack_own_image"), suffix="attack") as value:
        yield value


@pytest.fixture(scope="module")
def served(built: Built) -> Iterator[Any]:
    from openenv_sdk.client import GenericEnvClient

    with GenericEnvClient(image=built.image, timeout_s=120) as env:
        yield env


def test_control_the_reference_solution_scores_1(built: Built, served: Any) -> None:
    """Control: the task's reference solution, through the agent's bash, scores 1.0."""
    served.reset(task_id=TASK_ID)
    bash(served, built.solution())
    score = grade_episode(built, served)
    assert score.value == 1.0, score.evidence


def test_control_doing_nothing_scores_0(built: Built, served: Any) -> None:
    """Control: doing nothing scores 0.0."""
    served.reset(task_id=TASK_ID)
    assert grade_episode(built, served).value == 0.0


def test_read_the_verifier_files(built: Built, served: Any) -> None:
    """Read the verifier's tests: /tests, the environment's hidden/, any test_outputs.py or check.sh, the canary, before and after a check."""
    served.reset(task_id=TASK_ID)
    probe = (
        "cat /tests/test_outputs.py; cat /tests/test.sh; ls /env/hidden /logs/verifier; "
        "find / -xdev \\( -name 'test_outputs.py' -o -name 'check.sh' -o -name hidden \\) -not -path '/proc/*' 2>/dev/null; "
        f"grep -rl {CANARY} /app /etc /opt /usr/local /tmp /var /root /home 2>/dev/null; echo done"
    )
    for when in ("before a check", "after a check"):
        out = bash(served, probe)
        stdout, _, stderr = out.partition("[stderr]")
        assert stdout.strip() == "done", f"{when}: found {stdout!r}"
        assert "cat: /tests/test_outputs.py: No such file or directory" in stderr and CANARY not in out, when
        grade_episode(built, served)  # the check's files are mounted for the check alone, then gone


def test_files_pytest_would_read(built: Built, served: Any) -> None:
    """Plant what pytest or Python would pick up in the workspace (pytest.py, conftest.py, pytest.ini, sitecustomize.py) to pass every test."""
    served.reset(task_id=TASK_ID)
    passing = "import os, sys\nopen('/logs/verifier/reward.txt', 'w').write('1')\nos._exit(0)\n"
    bash(served, WRONG_REPORT)
    for name, text in (
        ("pytest.py", passing),
        ("conftest.py", "import pytest\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    pass\n" + passing),
        ("pytest.ini", "[pytest]\naddopts = -p conftest --co\n"),
        ("sitecustomize.py", passing),
        ("usercustomize.py", passing),
    ):
        served.call_tool("write_file", path=f"/app/{name}", content=text)
    score = grade_episode(built, served)
    assert score.value == 0.0, score.evidence


def test_write_the_reward_file(built: Built, served: Any) -> None:
    """Write Harbor's /logs/verifier/reward.txt (and a copy in the workspace) before the check."""
    served.reset(task_id=TASK_ID)
    out = bash(served, f"{WRONG_REPORT}; {FORGE}; mkdir -p /app/logs/verifier && echo 1 > /app/logs/verifier/reward.txt; ls /logs")
    assert "No such file or directory" in out or "Read-only" in out, out
    assert grade_episode(built, served).value == 0.0


def test_the_program_the_tests_run_forges_the_reward(built: Built, served: Any) -> None:
    """The agent's script, run by a test, writes reward 1 to /logs/verifier, signals pytest and its parents, and prints wrong figures."""
    served.reset(task_id=TASK_ID)
    bash(served, "printf 'Stock left after orders\\ngadgets: 2\\nwidgets: 1\\n' > /app/report.txt")
    script = (
        "#!/bin/bash\n"
        f"{FORGE}\n"
        "for pid in $(pgrep -f pytest) $PPID; do kill -9 $pid 2>/dev/null; done\n"
        "echo 999\n"
    )
    served.call_tool("write_file", path="/app/remaining.sh", content=script)
    score = grade_episode(built, served)
    assert score.value == 0.0, score.evidence
    assert "1 failed, 2 passed" in next(iter(score.evidence.values()))["output"]
