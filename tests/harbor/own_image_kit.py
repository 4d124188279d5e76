"""What the tests of Harbor tasks with their own image share: the fixture task, a copy of the
terminal environment to import it into, its image built on the local base (labelled, removed
after), and the agent's `bash` and the host-side grade of an episode."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = ROOT / "environments" / "terminal"
FIXTURE = Path(__file__).parent / "fixtures" / "stock-report"
"""Its own Dockerfile (a tool in /usr/local/bin, data in /etc, ENV), a compose file, a three-step check."""
TB2_FIXTURE = Path(__file__).parent / "fixtures" / "fix-service-config"
"""Terminal-Bench 2's shape without a compose file: ENV PATH, a WORKDIR under /workspace, the uvx test.sh."""
TASK_ID = "stock_report"
TEST_LABEL = {"org.openenv.test": "harbor-own-image"}
CANARY = "VERIFIER-CANARY-7c1e9a"
"""A string only the fixture's verifier files hold."""

requires_engine = pytest.mark.skipif(
    os.environ.get("OPENENV_TEST_CONTAINERS") != "1",
    reason="needs a container engine: set OPENENV_TEST_CONTAINERS=1 (after scripts/setup_container_engine.sh)",
)


def terminal_copy(root: Path) -> Path:
    """The terminal environment without its tasks: its server, grader, manifest and `hidden/lib.sh`."""
    env = root / "env"
    (env / "tasks").mkdir(parents=True)
    (env / "hidden").mkdir()
    for name in ("openenv.yaml", "terminal_env.py", "grader.py"):
        shutil.copy(TERMINAL / name, env / name)
    shutil.copy(TERMINAL / "hidden" / "lib.sh", env / "hidden" / "lib.sh")
    return env


class Built:
    """The fixtures imported into `env`, each built as `images[task_id]` (`image`: the stock report's)."""

    def __init__(self, env: Path, images: dict[str, str]) -> None:
        self.env = env
        self.images = images
        self.image = images.get(TASK_ID, "")

    def solution(self, task_id: str = TASK_ID) -> str:
        return (self.env / "hidden" / task_id / "solution.sh").read_text()


@contextlib.contextmanager
def built_fixture(root: Path, *, suffix: str, fixtures: tuple[Path, ...] = (FIXTURE,)) -> Iterator[Built]:
    """Import `fixtures` with their own image and build each on one server image (tags end in
    `suffix`); remove the images after."""
    from openenv_sdk.containers.engine import connect_engine
    from openenv_sdk.harbor import build_task_image, import_harbor_task

    env = terminal_copy(root)
    task_ids = [import_harbor_task(f, tasks_dir=env / "tasks", own_image=True).task_id for f in fixtures]
    engine = connect_engine()
    server = f"openenv-test-harbor-server-{suffix}:latest"
    images = {t: f"openenv-test-harbor-{t.replace('_', '-')}-{suffix}:latest" for t in task_ids}
    try:
        for task_id, tag in images.items():
            build_task_image(env, task_id, tag=tag, server_tag=server, labels=TEST_LABEL, engine=engine)
        yield Built(env, images)
    finally:
        for tag in (*images.values(), server):
            with contextlib.suppress(Exception):  # not built (a failed build): nothing to remove
                engine.images.remove(tag, force=True)
        engine.close()


def bash(env: Any, command: str) -> str:
    """The agent's `bash` tool: its output as the agent reads it."""
    result = env.call_tool("bash", command=command)
    return "".join(getattr(part, "text", "") for part in result.content)


def grade_episode(built: Built, env: Any) -> Any:
    """The environment's own grader, host-side, on the episode as it stands."""
    from openenv_sdk.loader import load_grader
    from openenv_sdk.rubric import grade

    return grade(load_grader(built.env), env)
