"""Replay every task over the wire: the gold patch scores 1.0; submitting nothing, "fixing" the
tests instead of the code, or forging the verdict from the package's `__init__.py` (the forgeries
that beat the earlier in-process grading) scores 0.0. Sessions run in parallel threads against
one server.

`OPENENV_TEST_CONTAINERS=1` runs the same replay against the image (`openenv build`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from mini_swe_env import task_ids
from mini_swe_testkit import ENV_DIR, apply_unified_diff, call, load_grader_module, open_client, register_server

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.rubric import Score, grade

CONTAINERS = os.environ.get("OPENENV_TEST_CONTAINERS") == "1"

FORCE_PASS_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""


FORGERY = """
import gc, json, os, sys
# the guard and request loop of whatever runs this code, found through __main__: every answer says yes
for _cls in [c for c in vars(sys.modules.get("__main__")).values() if isinstance(c, type)]:
    for _attr in [a for a in vars(_cls) if any(w in a.lower() for w in ("check", "verify", "tamper", "guard"))]:
        setattr(_cls, _attr, lambda *a, **k: None)
    if hasattr(_cls, "serve"):
        def _serve(self, request, _real=_cls.serve):
            return {"id": _real(self, request).get("id"), "ok": True}
        _cls.serve = _serve
# the report channel's emit, found through gc, shadowed
for _o in gc.get_objects():
    for _name in ("emit", "sign", "report"):
        if callable(getattr(type(_o), _name, None)) and type(_o).__module__ == "__main__":
            setattr(type(_o), _name, lambda *a, **k: None)
# a complete report of its own, wherever a report might be read
_ids = IDS
_text = json.dumps({"exitstatus": 0, "collected": _ids, "outcomes": {n: "passed" for n in _ids}, "messages": {},
                    "collect_errors": {}})
for _folder in {os.getcwd(), os.path.dirname(os.getcwd()), "/tmp", os.environ.get("HOME", "/tmp")}:
    for _name in (".openenv_grading_report.json", "openenv_grading_report.json", "report.json"):
        try:
            with open(os.path.join(_folder, _name), "w") as _f:
                _f.write(_text)
        except OSError:
            pass
"""


def attempt_forgery(client: GenericEnvClient, task_id: str) -> None:
    """A line in the package's `__init__.py` that forges the verdict (the bug stays)."""
    task = load_grader_module().load_hidden_task(task_id)
    init = f"{task.source_paths[0]}/__init__.py"
    code = FORGERY.replace("IDS", repr([*task.fail_to_pass, *task.pass_to_pass]))
    call(client, "write_file", path=init, content=_read_whole(client, init) + code)
    call(client, "submit")


def attempt_gold(client: GenericEnvClient, task_id: str) -> None:
    """The reference solution, applied as an agent would: write the patch, `git apply` it."""
    patch = (ENV_DIR / "hidden" / task_id / "gold.patch").read_text()
    if "[exit code 0]" in call(client, "run", command="command -v git"):
        call(client, "write_file", path=".gold.patch", content=patch)
        out = call(client, "run", command="git apply --verbose .gold.patch && rm .gold.patch && git status --short")
        assert out.endswith("[exit code 0]") and " M " in out, out
    else:  # an image without git: apply it here and write the files
        for path, text in apply_unified_diff(patch, lambda p: _read_whole(client, p)).items():
            call(client, "write_file", path=path, content=text)
    call(client, "submit")


def _read_whole(client: GenericEnvClient, path: str) -> str:
    out = call(client, "run", command=f"cat {path}", timeout_s=10)
    return out.removesuffix("[exit code 0]").removesuffix("\n") + "\n"


def attempt_null(client: GenericEnvClient, task_id: str) -> None:
    """Submit without changing anything."""
    call(client, "submit")


def attempt_tests_fix(client: GenericEnvClient, task_id: str) -> None:
    """Make the test suite pass without fixing the library: force-pass conftests (at the root,
    in tests/, in the package), test files emptied, and a pytest.ini that deselects the rest."""
    grader = load_grader_module()
    package = grader.load_hidden_task(task_id).source_paths[0]
    for path in ("conftest.py", "tests/conftest.py", f"{package}/conftest.py"):
        call(client, "write_file", path=path, content=FORCE_PASS_CONFTEST)
    for path in call(client, "list_files", path="tests").splitlines():
        if path.endswith(".py") and path.startswith("tests/test_"):
            call(client, "write_file", path=path, content="def test_fine():\n    assert True\n")
    call(client, "write_file", path="pytest.ini", content="[pytest]\naddopts = -p no:randomly\npythonpath = .\n")
    out = call(client, "run", command="python -m pytest -q 2>&1 | tail -1")
    assert " passed" in out and "failed" not in out, out  # the agent's own run is fooled
    call(client, "submit")


ATTEMPTS: dict[str, tuple[Callable[[GenericEnvClient, str], None], float]] = {
    "gold": (attempt_gold, 1.0),
    "null": (attempt_null, 0.0),
    "tests_fix": (attempt_tests_fix, 0.0),
    "forgery": (attempt_forgery, 0.0),
}


def run_episode(base_url: str, task_id: str, attempt: str) -> tuple[Score, dict[str, Any]]:
    grader = load_grader_module()
    with open_client(base_url, timeout_s=120) as client:
        first = client.reset(task_id=task_id)
        assert first.observation["task_id"] == task_id and first.reward is None
        assert first.observation["workdir"] in first.observation["prompt"]
        ATTEMPTS[attempt][0](client, task_id)
        state = client.state()
        assert state["submitted"] is True
        return grade(grader.MiniSweGrader(), client), state


@pytest.fixture(scope="module", params=["local", "image"])
def replay_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "local":
        yield request.getfixturevalue("server_url")
        return
    if not CONTAINERS:
        pytest.skip("set OPENENV_TEST_CONTAINERS=1 to replay against the image")
    from openenv_sdk.build import build_image
    from openenv_sdk.providers.docker import DockerProvider

    tag = build_image(ENV_DIR, output="quiet", timeout_s=1200)
    provider = DockerProvider(tag, startup_timeout_s=120)
    try:
        provider.start()
        yield register_server(provider)
    finally:
        provider.stop()


@pytest.fixture(scope="module")
def replays(replay_url: str) -> Iterator[dict[tuple[str, str], Future[tuple[Score, dict[str, Any]]]]]:
    """Every task's attempts, all submitted at once to a pool of parallel sessions."""
    with ThreadPoolExecutor(max_workers=6, thread_name_prefix="replay") as pool:
        futures = {
            (task_id, name): pool.submit(run_episode, replay_url, task_id, name)
            for task_id in task_ids()
            for name in ATTEMPTS
        }
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


@pytest.mark.parametrize("task_id", task_ids())
def test_replay(replays: dict[tuple[str, str], Future[tuple[Score, dict[str, Any]]]], task_id: str) -> None:
    results = {name: replays[(task_id, name)].result(timeout=110) for name in ATTEMPTS}
    for name, (score, _) in results.items():
        expected = ATTEMPTS[name][1]
        assert score.value == expected, (
            f"{task_id} {name}: {score.value}\n{json.dumps(score.evidence, indent=1)[-3000:]}"
        )
    gold = results["gold"][0].evidence["resolved"]
    assert gold["resolved"] and gold["task_id"] == task_id
    assert set(gold["FAIL_TO_PASS"].values()) == {"passed"} and set(gold["PASS_TO_PASS"].values()) == {"passed"}
    assert not gold["discarded_changes"] and gold["kept_changes"]
    null = results["null"][0].evidence["resolved"]
    assert "passed" not in set(null["FAIL_TO_PASS"].values()) and set(null["PASS_TO_PASS"].values()) == {"passed"}
    assert null["kept_changes"] == [] and null["diff"] == ""
    cheat = results["tests_fix"][0].evidence["resolved"]
    assert any(change.endswith("tests/conftest.py") for change in cheat["discarded_changes"])
    assert set(cheat["PASS_TO_PASS"].values()) == {"passed"}  # the original tests were restored and run
    assert "conftest.py added or changed: tests/conftest.py" in cheat["tampering"]
    assert "pytest configuration added or changed: pytest.ini" in cheat["tampering"]
    assert any(t.startswith("test file edited: tests/") for t in cheat["tampering"])
    assert cheat["reason"].startswith("tampering: ") or "tampering: " in cheat["reason"]
    assert gold["tampering"] == [] and gold["report"] == "complete" and null["tampering"] == []
    forged = results["forgery"][0].evidence["resolved"]
    assert forged["report"] == "complete" and forged["tampering"] == []  # the tests ran, judged here
    assert "failed" in set(forged["PASS_TO_PASS"].values()), forged["PASS_TO_PASS"]  # answers of True fail


def test_hidden_data_is_out_of_the_agents_reach(replay_url: str, server_url: str) -> None:
    """In the image there is no hidden/ at all; served from this folder as root, it is closed."""
    in_image = replay_url != server_url
    with open_client(replay_url) as client:
        client.reset(task_id="datekit-1")
        where = "/env" if in_image else str(ENV_DIR)
        out = call(
            client, "run", command=f"ls {where}/hidden/datekit-1 2>&1; cat {where}/hidden/datekit-1/gold.patch 2>&1"
        )
    if in_image:
        assert out.count("No such file or directory") == 2, f"the image holds the hidden data:\n{out}"
    elif os.geteuid() == 0:  # the sandbox shows none of the host's files outside the system and runtime
        assert out.count("No such file or directory") == 2, out
    else:
        pytest.skip("served from this folder without root, the agent runs as this user and can read hidden/")


def test_unsubmitted_episode_is_graded_as_it_stands(server_url: str) -> None:
    grader = load_grader_module()
    with open_client(server_url) as client:
        client.reset(task_id="intervals-1")
        call(
            client, "edit_file", path="intervals/ops.py", old_str="key=lambda iv: iv[1]", new_str="key=lambda iv: iv[0]"
        )
        score = grade(grader.MiniSweGrader(), client)
    assert score.value == 1.0 and score.evidence["resolved"]["submitted"] is False
