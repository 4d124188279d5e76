"""Quickstart: serve Wordle from its folder (no container engine), play an episode as an
orchestrator, let an "agent" act through MCP, and grade the episode host-side.

Run: .venv/bin/python examples/quickstart.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.loader import import_ref
from openenv_sdk.rubric import grade

ROOT = Path(__file__).resolve().parents[1]
WORDLE = ROOT / "environments" / "wordle"
console = Console()


def main() -> int:
    grader = import_ref(WORDLE, "grader:WordleGrader", what="grader")()
    with GenericEnvClient(env_dir=WORDLE) as env:  # starts `openenv serve` on a free port
        console.print(f"[bold]Server[/] {env.base_url}  tools: {[t.name for t in env.list_tools()]}")
        result = env.reset(task_id=7)
        console.print(result.observation["message"])

        # The orchestrator steps with plain dict actions, checked against the server's /schema.
        for word in ["crane", "sloth"]:
            result = env.step({"guess": word})
            console.print(f"step  {word}: {result.observation['board'][-1]}  ({result.observation['message']})")

        # The agent's side: a tool call over standard MCP, bound to this episode by its token.
        answer = env.call("reveal")  # orchestrator-only: the agent can never reach this
        reply = env.call_tool("guess", word=answer).content[0].text
        console.print(f"agent (MCP) guess {answer}: {reply.splitlines()[0]}")

        # The reward is computed here, on the host, never inside the container.
        score = grade(grader, env)
        console.print(f"[bold green]reward {score.value:.3f}[/]  parts {score.components}")
        return 0 if score.value > 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
