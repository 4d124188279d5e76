"""OpenEnv 0.10's side of the Task API compatibility test; run with OpenEnv's interpreter, not this SDK's.

    .bench/openenv-venv/bin/python tests/server/openenv_task_api_probe.py URL TASKS_JSON

Serves the same tasks from OpenEnv's own `create_app` (an environment with the `TaskProvider`
methods, in process), sends the same requests to it and to our server at URL, and prints both
answers as JSON; then reads our server with OpenEnv's own Task API client (`HarborEnv`, whose
paths are fixed to `/harbor_env/...`, so our test names its environment `harbor_env`).
This file imports only `openenv` and its dependencies; pytest never collects it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
from fastapi.testclient import TestClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from openenv.harbor.client import HarborEnv

URL, RECORDS = sys.argv[1], json.loads(open(sys.argv[2]).read())
SPLITS: dict[str, list[dict[str, Any]]] = {}
for record in RECORDS:
    rows = SPLITS.setdefault(record["split"], [])
    rows.append({"index": len(rows), **record})


class ReferenceTaskEnvironment(Environment):
    """The reference: the same tasks, through OpenEnv's TaskProvider methods."""

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: Action, timeout_s: Any = None, **kwargs: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()

    def list_splits(self) -> list[dict[str, Any]]:
        kinds = {"train", "validation", "test"}
        return [{"name": n, "type": n if n in kinds else "validation", "num_tasks": len(r)} for n, r in SPLITS.items()]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return SPLITS[split]

    def num_tasks(self, split: str) -> int:
        return len(SPLITS[split])

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        if not 0 <= index < len(SPLITS[split]):
            raise IndexError(index)
        return SPLITS[split][index]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        return SPLITS[split][start:stop]


REQUESTS: list[tuple[str, str, Any]] = [
    ("GET", "/list_environments", None),
    ("GET", "/harbor_env/splits", None),
    ("POST", "/harbor_env/tasks", {"split": "train"}),
    ("POST", "/harbor_env/num_tasks", {"split": "test"}),
    ("POST", "/HARBOR_ENV/num_tasks", {"split": "train"}),
    ("POST", "/harbor_env/task", {"split": "train", "index": 1}),
    ("POST", "/harbor_env/task_range", {"split": "train", "start": 1, "stop": 3}),
    ("POST", "/harbor_env/task_range", {"split": "train"}),
    ("POST", "/harbor_env/task_range", {"split": "train", "start": -2}),
    # refused by both (the status may differ; the test checks both are 4xx)
    ("POST", "/harbor_env/task", {"split": "train", "index": 99}),
    ("GET", "/other_env/splits", None),
    ("POST", "/harbor_env/tasks", {}),
    ("POST", "/harbor_env/tasks", {"split": "train", "limit": 3}),
]


def answers(client: Any) -> list[dict[str, Any]]:
    out = []
    for method, path, body in REQUESTS:
        response = client.request(method, path, json=body)
        out.append({"request": [method, path, body], "status": response.status_code, "body": response.json()})
    return out


def main() -> None:
    reference = create_app(ReferenceTaskEnvironment, Action, Observation, env_name="harbor_env")
    with TestClient(reference) as client:
        theirs = answers(client)
    with httpx.Client(base_url=URL, timeout=30) as client:
        ours = answers(client)
    env = HarborEnv(base_url=URL)
    try:
        harbor = {
            "splits": env.splits(),
            "num_tasks": env.num_tasks("train"),
            "task": env.get_task("train", 1).model_dump(),
            "task_range": [t.model_dump() for t in env.get_task_range("train", 0, 2)],
        }
    finally:
        env._http.close()
    print(json.dumps({"reference": theirs, "ours": ours, "harbor_client": harbor}))


if __name__ == "__main__":
    main()
