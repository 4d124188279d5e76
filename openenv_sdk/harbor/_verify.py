"""Play imported tasks through their environment: the reference solution must score 1.0, nothing 0.0.

An import can succeed and the task still not work here: the Dockerfile's base image had a tool
the terminal environment's system lacks, or a test expects root. This says so at once, through
the real server (`GenericEnvClient(env_dir=...)`), the agent's `bash` tool and the environment's
own host-side grader.
"""

from __future__ import annotations

from pathlib import Path

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


def verify_imported(env_dir: str | Path, task_ids: list[str]) -> list[Verification]:
    """Serve `env_dir`, and play each task's `hidden/<id>/solution.sh` and `null.sh` through `bash`.

    Raises:
        ManifestError: the environment names no grader, or cannot be loaded.
        ProviderError: its server did not start.
    """
    from openenv_sdk.client import GenericEnvClient
    from openenv_sdk.loader import load_grader
    from openenv_sdk.rubric import grade

    env_dir = Path(env_dir)
    grader = load_grader(env_dir)
    results = []
    with GenericEnvClient(env_dir=env_dir) as env:
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
