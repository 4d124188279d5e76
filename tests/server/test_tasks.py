"""The Task API: our server against OpenEnv 0.10's (same requests, same answers), OpenEnv's own
Task API client and ours against our server on real ports, the token, and the shipped environments."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from openenv_sdk import (
    Action,
    AsyncEnvClient,
    EnvClient,
    Environment,
    InvalidActionError,
    Observation,
    ServerConfig,
    ServerError,
    create_app,
)
from openenv_sdk.loader import load_environment
from openenv_sdk.tasks import ServedTask, TaskIndex, TaskRecord, TaskSplit
from openenv_sdk.testing import serve_app
from tests.openenv_reference import OPENENV_PYTHON, REPO, require

PROBE = Path(__file__).with_name("openenv_task_api_probe.py")

RECORDS = [
    TaskRecord(id="t0", task_id="t0", task_name="hello", instruction="Say hello."),
    TaskRecord(id="t1", task_id="t1", task_name="count", instruction="Count to three."),
    TaskRecord(id="t2", task_id="t2", task_name="sort", instruction="Sort the list."),
    TaskRecord(id="e0", split="test", task_id="e0", task_name="add", instruction="Add two numbers."),
    TaskRecord(id="e1", split="test", task_id="e1", task_name="sub", instruction="Subtract."),
]


class _Playable(Environment):
    """An environment with a step (create_app refuses one that can do nothing); these tests are
    about its tasks."""

    def step(self, action: Action) -> Observation:
        return Observation(done=True)


class HarborNamedEnvironment(_Playable):
    """Five tasks in two splits, under the name OpenEnv's Task API client expects."""

    name = "harbor_env"
    calls: ClassVar[int] = 0

    @classmethod
    def tasks(cls) -> list[TaskRecord]:
        cls.calls += 1
        return RECORDS


class NoTasksEnvironment(_Playable):
    """Declares no tasks."""


class BrokenTasksEnvironment(_Playable):
    """Its task list cannot be read once the server runs (create_app reads it at the start)."""

    broken: ClassVar[bool] = False

    @classmethod
    def tasks(cls) -> list[TaskRecord]:
        if cls.broken:
            raise OSError("tasks/ is missing")
        return []


@pytest.fixture
def url() -> Any:
    with serve_app(create_app(HarborNamedEnvironment)) as base_url:
        yield base_url


def test_answers_match_openenv_and_its_client_reads_them(url: str, tmp_path: Path) -> None:
    records = tmp_path / "records.json"
    records.write_text(json.dumps([r.model_dump(mode="json") for r in RECORDS]))
    done = subprocess.run(
        [str(require(OPENENV_PYTHON)), str(PROBE), url, str(records)],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    for theirs, ours in zip(result["reference"], result["ours"], strict=True):
        assert ours["request"] == theirs["request"]
        if theirs["status"] == 200:
            assert (ours["status"], ours["body"]) == (200, theirs["body"]), ours["request"]
        else:
            assert 400 <= theirs["status"] < 500 and 400 <= ours["status"] < 500, (theirs, ours)
    harbor = result["harbor_client"]
    assert harbor["splits"] == [
        {"name": "train", "type": "train", "num_tasks": 3}, {"name": "test", "type": "test", "num_tasks": 2}
    ]  # fmt: skip
    assert harbor["num_tasks"] == 3
    assert harbor["task"] == {"index": 1, "task_id": "t1", "task_name": "count", "dataset": "", "instruction": "Count to three."}
    assert [t["task_id"] for t in harbor["task_range"]] == ["t0", "t1"]


def test_sync_client(url: str) -> None:
    with EnvClient(url) as env:
        assert env.splits() == [
            TaskSplit(name="train", type="train", num_tasks=3), TaskSplit(name="test", type="test", num_tasks=2)
        ]  # fmt: skip
        assert [t.id for t in env.tasks("train")] == ["t0", "t1", "t2"]
        assert [(t.id, t.index) for t in env.tasks("train", start=1)] == [("t1", 1), ("t2", 2)]
        assert env.num_tasks("test") == 2
        task = env.task("e1")
        assert isinstance(task, ServedTask)
        assert (task.split, task.index, task.reset_kwargs, task.model_extra) == (
            "test", 1, {"task_id": "e1"}, {"task_id": "e1", "task_name": "sub", "instruction": "Subtract."}
        )  # fmt: skip
        assert env.task(split="test", index=1) == task
        with pytest.raises(InvalidActionError, match=r"unknown task id 'e12'\. Did you mean 'e1'\?"):
            env.task("e12")
        with pytest.raises(InvalidActionError, match=r"unknown split 'trian'\. Did you mean 'train'\?"):
            env.tasks("trian")
        with pytest.raises(InvalidActionError, match=r"index 3 is out of range: split 'train' has tasks 0 to 2"):
            env.task(split="train", index=3)
        with pytest.raises(ValueError, match=r"task\(\) takes a task id"):
            env.task("e1", split="test", index=1)
        with pytest.raises(ValueError, match=r"task\(\) takes a task id"):
            env.task()


@pytest.mark.anyio
async def test_async_client(url: str) -> None:
    async with AsyncEnvClient(url) as env:
        assert [s.name for s in await env.splits()] == ["train", "test"]
        assert [t.id for t in await env.tasks("test")] == ["e0", "e1"]
        assert [t.id for t in await env.tasks("train", stop=1)] == ["t0"]
        assert await env.num_tasks("train") == 3
        assert (await env.task("t2")).index == 2
        assert (await env.task(split="train", index=0)).id == "t0"
        with pytest.raises(InvalidActionError, match="unknown split 'dev'"):
            await env.num_tasks("dev")


def test_tasks_are_read_once_per_server(url: str) -> None:
    HarborNamedEnvironment.calls = 0
    with httpx.Client(base_url=url) as http:
        for _ in range(3):
            assert http.get("/harbor_env/splits").status_code == 200
    assert HarborNamedEnvironment.calls == 1


def test_the_orchestrator_token_guards_the_task_api() -> None:
    app = create_app(HarborNamedEnvironment, config=ServerConfig(orchestrator_token="s3cret"))
    with serve_app(app) as base_url, httpx.Client(base_url=base_url) as http:
        for path in ("/list_environments", "/harbor_env/splits"):
            refused = http.get(path)
            assert (refused.status_code, refused.json()["detail"]["code"]) == (401, "UNAUTHORIZED")
        assert http.post("/harbor_env/num_tasks", json={"split": "train"}).status_code == 401
        with EnvClient(base_url, orchestrator_token="s3cret") as env:
            assert env.num_tasks("train") == 3


def test_an_environment_without_tasks_has_no_splits() -> None:
    with serve_app(create_app(NoTasksEnvironment)) as base_url, EnvClient(base_url) as env:
        assert env.splits() == []
        with pytest.raises(InvalidActionError, match=r"unknown split 'train'\. Splits: none"):
            env.tasks("train")


def test_a_failing_tasks_hook_is_an_execution_error_and_the_server_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(BrokenTasksEnvironment)
    monkeypatch.setattr(BrokenTasksEnvironment, "broken", True)
    with serve_app(app) as base_url, EnvClient(base_url) as env:
        with pytest.raises(ServerError, match=r"BrokenTasksEnvironment\.tasks\(\) failed: OSError: tasks/ is missing"):
            env.splits()
        assert httpx.get(f"{base_url}/health").status_code == 200


def test_task_index_refuses_duplicate_ids() -> None:
    with pytest.raises(ValueError, match="two tasks have the id 'a'"):
        TaskIndex([TaskRecord(id="a"), TaskRecord(id="a", split="test")])


def _hidden_texts(env_dir: Path) -> list[str]:
    hidden = env_dir / "hidden"
    files = [p for p in hidden.rglob("*") if p.is_file()] if hidden.is_dir() else []
    texts = [p.read_text(encoding="utf-8", errors="replace").strip() for p in files]
    return [t for t in texts if len(t) >= 40]


@pytest.mark.parametrize("name", ["wordle", "coding", "terminal", "mini_swe"])
def test_shipped_environments_declare_public_tasks(name: str) -> None:
    env_dir = REPO / "environments" / name
    env_cls = load_environment(env_dir).env_cls
    index = TaskIndex(env_cls.tasks())
    splits = index.splits()
    assert splits and all(s.num_tasks > 0 for s in splits)
    served = json.dumps([index.task_range(s.name) for s in splits])
    for text in _hidden_texts(env_dir):
        assert text not in served
    if name == "wordle":  # a record names the task by its line, never by its word
        words = set((env_dir / "answers.txt").read_text().split())
        assert not words & set(_strings(json.loads(served)))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_a_task_starts_with_its_reset_kwargs() -> None:
    env_cls = load_environment(REPO / "environments" / "wordle").env_cls
    with serve_app(create_app(env_cls)) as base_url, EnvClient(base_url, env_cls=env_cls) as env:
        task = env.task(split="test", index=0)
        assert task.reset_kwargs == {"task_id": 1000}
        env.reset(**task.reset_kwargs)
        assert env.state().task_id == 1000


class OpenEnvStyleEnvironment(_Playable):
    """Written for OpenEnv: TaskProvider instance methods, one of them async."""

    closed: ClassVar[int] = 0

    def list_splits(self) -> list[Any]:
        return ["train", {"name": "dev", "type": "validation"}]

    async def list_tasks(self, split: str) -> list[dict[str, Any]]:
        if split == "train":
            return [{"id": "q1", "question": "1+1"}, {"question": "2+2"}]
        return [{"id": "d1", "question": "3+3", "index": 7}]

    def close(self) -> None:
        type(self).closed += 1


def test_openenv_task_provider_methods_are_served() -> None:
    OpenEnvStyleEnvironment.closed = 0
    with serve_app(create_app(OpenEnvStyleEnvironment)) as base_url, EnvClient(base_url) as env:
        assert [(s.name, s.type, s.num_tasks) for s in env.splits()] == [("train", "train", 2), ("dev", "validation", 1)]
        second = env.task(split="train", index=1)
        assert (second.id, second.reset_kwargs, second.model_extra) == (
            "train-1", {"split": "train", "index": 1}, {"question": "2+2"}
        )  # fmt: skip
        assert env.task("d1").model_dump() == {
            "id": "d1", "split": "dev", "reset_kwargs": {"split": "dev", "index": 0}, "question": "3+3", "index": 0
        }  # fmt: skip
    # create_app's rule check, the instance the served tasks were read from, and the session's
    assert OpenEnvStyleEnvironment.closed == 3
