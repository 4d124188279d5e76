"""Terminus-2 (harbor's terminal agent) run inside an environment's sandbox, on a local tmux.

harbor's `Terminus2` is a loop that keeps a chat with the model (litellm, OpenAI chat
completions, no tools: each answer is a JSON object with keystrokes) and types the keystrokes
into a tmux session, which it drives through harbor's environment API (`environment.exec(...)`
runs `tmux send-keys`, `tmux capture-pane`, ...). harbor runs that loop on the host and the tmux
in a task container; here the whole of it runs where every agent program runs, in the episode's
sandbox: this script gives `Terminus2` an environment whose `exec` is a local `bash -c`, so the
tmux server, the shell the policy types into and the loop itself are processes of the sandbox,
with its limits, and nothing of the host (the grader included) is reachable from any of them.

It is copied into the sandbox and run with the Python of harbor's own venv (harbor needs Python
>= 3.12; `openenv_sdk.agents.known.TERMINUS_2` installs both):

    python terminus.py --task-file task.md

The model is `OPENENV_MODEL` at `OPENAI_BASE_URL` with the key in `OPENAI_API_KEY`. Settings:
summarization off (it makes extra calls the policy would answer out of turn), no asciinema
recording (nothing to install, no network), and no retries of a failed model call (harbor
retries 3 times in the agent and 3 times with 4-15 s back-off in its litellm wrapper): the
interception server refuses a call only when the rollout is over, so the run ends at the first
refusal. The tmux shell gets neither the key nor this interpreter's library path.

This file is read as text by `known.py` and never imported by the SDK (its imports are harbor's).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.agents.terminus_2 import terminus_2 as t2  # type: ignore[import-not-found]
from harbor.agents.terminus_2.tmux_session import TmuxSession  # type: ignore[import-not-found]
from harbor.environments.base import ExecResult  # type: ignore[import-not-found]
from harbor.llms.lite_llm import LiteLLM  # type: ignore[import-not-found]
from harbor.models.agent.context import AgentContext  # type: ignore[import-not-found]
from tenacity import stop_after_attempt  # type: ignore[import-not-found]

ATTEMPTS_ENV = "OPENENV_TERMINUS_MODEL_ATTEMPTS"
"""Attempts per model call in each of harbor's two retry layers: 1 by default (see the module
docstring); 3 is harbor's own, for a real provider that rate-limits (`black_box`)."""
try:
    _attempts = max(1, int(os.environ.get(ATTEMPTS_ENV) or "1"))
except ValueError:
    sys.exit(f"terminus-2: {ATTEMPTS_ENV} must be a whole number, got {os.environ.get(ATTEMPTS_ENV)!r}")
LiteLLM.call = LiteLLM.call.retry_with(stop=stop_after_attempt(_attempts))
t2.Terminus2._query_llm = t2.Terminus2._query_llm.retry_with(stop=stop_after_attempt(_attempts))

KEY_ENV = "OPENAI_API_KEY"
HIDDEN_FROM_SHELL = (KEY_ENV, "LD_LIBRARY_PATH", "PYTHONHOME", "PYTHONPATH", ATTEMPTS_ENV)
"""Not passed to the commands the agent runs (tmux, and through it the shell the policy types into)."""


class LocalShell:
    """The part of harbor's `BaseEnvironment` that `Terminus2` and its `TmuxSession` use, on this
    machine: `exec` runs `bash -c` here (the `user` harbor asks for is ignored: everything runs as
    the sandbox's user)."""

    default_user: str | None = None

    def __init__(self, workdir: str) -> None:
        self.session_id = "openenv"
        self._workdir = workdir
        self._env = {k: v for k, v in os.environ.items() if k not in HIDDEN_FROM_SHELL}

    async def exec(
        self, command: str, cwd: str | None = None, env: dict[str, str] | None = None, timeout_sec: float | None = None, user: Any = None
    ) -> Any:
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=cwd or self._workdir, env={**self._env, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout=timeout_sec)
        except TimeoutError:
            process.kill()
            await process.wait()
            return ExecResult(stdout="", stderr=f"timed out after {timeout_sec} s", return_code=124)
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), return_code=process.returncode)

    async def is_dir(self, path: str, user: Any = None) -> bool:
        return os.path.isdir(path)


class SandboxTerminus(t2.Terminus2):
    """`Terminus2` with its tmux session on `LocalShell`, its pane log in a private folder."""

    def __init__(self, *args: Any, pane_log: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pane_log = pane_log

    async def setup(self, environment: Any) -> None:
        self._session = TmuxSession(
            session_name=self.name(),
            environment=environment,
            logging_path=PurePosixPath(self._pane_log),
            local_asciinema_recording_path=None,
            remote_asciinema_recording_path=None,
            pane_width=self.options.tmux_pane_width,
            pane_height=self.options.tmux_pane_height,
        )
        await self._session.start()


async def run(task: str, *, workdir: str, model: str, base_url: str, max_turns: int, logs: Path) -> int:
    agent = SandboxTerminus(
        logs_dir=logs,
        model_name=f"openai/{model}",
        pane_log=logs / "terminus_2.pane",
        max_turns=max_turns,
        suppress_max_turns_warning=True,
        parser_name="json",
        api_base=base_url,
        enable_summarize=False,
        proactive_summarization_threshold=0,
        record_terminal_session=False,
        model_info={"max_input_tokens": 32768, "max_output_tokens": 4096, "input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
        llm_kwargs={"api_key": os.environ[KEY_ENV], "max_retries": 0},
    )
    shell = LocalShell(workdir)
    context = AgentContext()
    try:
        await agent.setup(shell)
        await agent.run(task, shell, context)
    finally:
        await shell.exec(f"tmux kill-session -t {agent.name()} 2>/dev/null", timeout_sec=10)
    print(f"terminus-2: {context.metadata.get('n_episodes') if context.metadata else 0} turns")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Terminus-2 on a local tmux, in the sandbox.")
    parser.add_argument("--task-file", required=True)
    parser.add_argument("--workdir", default=os.getcwd())
    parser.add_argument("--max-turns", type=int, default=50)
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("terminus-2: this agent needs tmux in the image (none on PATH)", file=sys.stderr)
        return 127
    task = Path(args.task_file).read_text(encoding="utf-8")
    model = os.environ.get("OPENENV_MODEL", "policy")
    base_url = os.environ["OPENAI_BASE_URL"]
    with tempfile.TemporaryDirectory(prefix="terminus-") as logs:
        try:
            return asyncio.run(run(task, workdir=args.workdir, model=model, base_url=base_url, max_turns=args.max_turns, logs=Path(logs)))
        except Exception as e:  # harbor's own errors (a refused model call): one line, then a failed exit
            print(f"terminus-2: {type(e).__name__}: {e}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
