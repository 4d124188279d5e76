"""Play imported tasks through their environment: the reference solution must score 1.0, nothing 0.0.

An import can succeed and the task still not work here: the Dockerfile's base image had a tool
the terminal environment's system lacks, or a test expects root. This says so at once, through
the real server (`GenericEnvClient(env_dir=...)`), the agent's `bash` tool and the environment's
own host-side grader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Verification", "verify_imported"]


class Verification(BaseModel):
    """One imported task, played twice."""

    task_id: str
    solution: float = Field(description="The reference solution's reward (want 1.0).")
    null: float = Field(description="Doing nothing's reward (want 0.0).")
    evidence: str = Field(default="", description="The check's failures and output tail, when a reward is wrong.")

    @property
    def ok(self) -> bool:
        return self.solution == 1.0 and self.null == 0.0


def verify_imported(env_dir: str | Path, task_ids: list[str], *, image_tags: dict[str, str] | None = None) -> list[Verification]:
    """Serve `env_dir`, and play each task's `hidden/<id>/solution.sh` and `null.sh` through `bash`.

    A task with its own image (`image: true`) is played in a container of that image, built by
    `build_task_image` unless `image_tags` names it; the others through one local server.

    Raises:
        ManifestError: the environment names no grader, or cannot be loaded.
        ProviderError: its server (or a task's container) did not start.
        BuildError: a task's image could not be built.
    """
    from openenv_sdk.client import GenericEnvClient
    from openenv_sdk.loader import load_grader

    from ._image import build_task_image

    env_dir = Path(env_dir)
    grader = load_grader(env_dir)
    own = [t for t in task_ids if _has_own_image(env_dir, t)]
    results = {}
    plain = [t for t in task_ids if t not in own]
    if plain:
        with GenericEnvClient(env_dir=env_dir) as env:
            results.update({v.task_id: v for v in _play(env, env_dir, grader, plain)})
    for task_id in own:
        tag = (image_tags or {}).get(task_id) or build_task_image(env_dir, task_id)
        with GenericEnvClient(image=tag) as env:
            results.update({v.task_id: v for v in _play(env, env_dir, grader, [task_id])})
    return [results[t] for t in task_ids]


def _has_own_image(env_dir: Path, task_id: str) -> bool:
    import yaml

    spec = env_dir / "tasks" / task_id / "task.yaml"
    return spec.is_file() and bool((yaml.safe_load(spec.read_text(encoding="utf-8")) or {}).get("image"))


def _play(env: Any, env_dir: Path, grader: Any, task_ids: list[str]) -> list[Verification]:
    from openenv_sdk.rubric import grade

    results = []
    for task_id in task_ids:
        rewards: dict[str, float] = {}
        evidence = ""
        for kind in ("solution", "null"):
            env.reset(task_id=task_id)
            script = (env_dir / "hidden" / task_id / f"{kind}.sh").read_text(encoding="utf-8")
            if script.strip():
                env.call_tool("bash", command=script)
            score = grade(grader, env)
            rewards[kind] = score.value
            if score.value != (1.0 if kind == "solution" else 0.0):
                check: object = next(iter(score.evidence.values()), {}) if score.evidence else {}
                failed = check.get("failed") if isinstance(check, dict) else None
                output = check.get("output", "") if isinstance(check, dict) else ""
                evidence += f"{kind}: reward {score.value}; failed: {failed}; output: {str(output)[-1500:]}\n"
        results.append(Verification(task_id=task_id, solution=rewards["solution"], null=rewards["null"], evidence=evidence))
    return results
