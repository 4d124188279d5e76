"""Third-party agents (Pi, ...) on terminal tasks, every model call answered by a scripted policy.

Each agent runs as its `AgentSpec` (`openenv_sdk.agents.known`) says, in the terminal
environment's sandbox (`run_agent`, an orchestrator call), against the trainer's
`InterceptionServer` in the API dialect the agent speaks. The policy is a `ScriptedBackend`: it
produces token ids (with logprobs) as a sampler would, replaying the task's reference solution
(`environments/terminal/hidden/<task>/solution.sh`, one block per call of the agent's own shell
tool) and then a final answer; or, with `--nothing`, answering at once without doing anything.
The episode is graded host-side and turned into training rows (`run_agent_episode`).

    .venv-trainers/bin/python examples/agents/agents_intercepted.py --agent pi
    .venv-trainers/bin/python examples/agents/agents_intercepted.py --agent pi-anthropic --task count_log_files
    .venv-trainers/bin/python examples/agents/agents_intercepted.py --agent pi --nothing

The first run installs the agent into `.cache/agents/` (with this host's npm or pip, from the
registry, pinned); the sandbox finds it there read-only (`OPENENV_AGENTS_DIR`).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_trainers.chat import use_tool_chat_template
from openenv_trainers.generation.base import SamplingParams
from openenv_trainers.intercept import InterceptedRequest, InterceptionServer, Rollout, ScriptedBackend, assistant_turn
from openenv_trainers.intercept.episode import AgentEpisodeConfig, AgentEpisodeResult, run_agent_episode
from openenv_trainers.sources import load_grader
from pydantic import SecretStr

from openenv_sdk.agents import AgentLaunch, AgentRun, AgentSpec, known, render_agent_command
from openenv_sdk.client import AsyncGenericEnvClient, GenericEnvClient

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = ROOT / ".cache" / "agents"
TERMINAL_DIR = ROOT / "environments" / "terminal"
TOKENIZER = ROOT / "trainers" / "tests" / "data" / "smollm2-135m-instruct-tokenizer.json.gz"
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TASKS = ("clean_tmp_files", "count_log_files", "csv_column_sum")


@dataclass(frozen=True)
class Agent:
    """An agent spec and how a policy calls its shell tool."""

    spec: AgentSpec
    dialect: str
    shell_call: Callable[[str], tuple[str, dict[str, Any]]]
    """A shell command -> the agent's tool name and arguments that run it."""


AGENTS: dict[str, Agent] = {
    "pi": Agent(known.PI, "chat", lambda command: ("bash", {"command": command})),
    "pi-responses": Agent(known.PI_RESPONSES, "responses", lambda command: ("bash", {"command": command})),
    "pi-anthropic": Agent(known.PI_ANTHROPIC, "anthropic", lambda command: ("bash", {"command": command})),
    "claude-code": Agent(known.CLAUDE_CODE, "anthropic", lambda command: ("Bash", {"command": command, "description": "Run a step"})),
    "codex": Agent(known.CODEX, "responses", lambda command: ("exec_command", {"cmd": command})),
    "opencode": Agent(known.OPENCODE, "chat", lambda command: ("bash", {"command": command, "description": "Run a step"})),
}


def policy_tokenizer() -> Any:
    """SmolLM2-135M-Instruct's tokenizer with the tool-calling chat template (the policy's)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode()),
        eos_token="<|im_end|>", bos_token="<|im_start|>", unk_token="<|endoftext|>", pad_token="<|im_end|>",
    )
    return use_tool_chat_template(tokenizer)


def solution_blocks(task_id: str) -> list[str]:
    """The task's reference solution, one shell block per tool call (`# ---` separates them)."""
    text = (TERMINAL_DIR / "hidden" / task_id / "solution.sh").read_text(encoding="utf-8")
    return [block.strip() for block in re.split(r"^# ---\s*$", text, flags=re.M) if block.strip()]


FINAL = "Done: the task is finished."


def reference_script(agent: Agent, task_id: str) -> Callable[[str], str]:
    """The policy's turns: turn k runs solution block k through the agent's shell tool; then it answers."""
    blocks = solution_blocks(task_id)

    def script(prompt: str) -> str:
        turn = prompt.count("<|im_start|>assistant") - 1  # earlier assistant turns (the last is the generation prompt)
        if turn < len(blocks):
            return assistant_turn(f"Step {turn + 1}.", [agent.shell_call(blocks[turn])])
        return FINAL

    return script


def nothing_script(prompt: str) -> str:
    return FINAL


def install_agent(spec: AgentSpec, *, cache_dir: Path = DEFAULT_CACHE) -> float:
    """Run the spec's install command on this host into `cache_dir` (a no-op once done); seconds taken."""
    import subprocess

    launch = AgentLaunch(spec=spec, base_url="http://127.0.0.1:9/v1", api_key=SecretStr("unused"))
    _, install, _, _ = render_agent_command(launch, workdir="/tmp", task_file="/dev/null", python=sys.executable)
    if not install:
        return 0.0
    cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agent-install-") as home:
        env = {"PATH": SANDBOX_PATH, "HOME": home, "LANG": "C.UTF-8", "OPENENV_AGENTS_DIR": str(cache_dir)}
        done = subprocess.run(["bash", "-c", install], env=env, cwd=home, capture_output=True, text=True, timeout=spec.install_timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"the install of {spec.name} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return time.monotonic() - started


def _cached(spec: AgentSpec, cache_dir: Path) -> AgentSpec:
    return spec.model_copy(update={"env": {**spec.env, "OPENENV_AGENTS_DIR": str(cache_dir)}})


@dataclass
class Run:
    """One graded episode: the trainer's result, the policy that answered, the dialects it heard."""

    result: AgentEpisodeResult
    policy: ScriptedBackend
    dialects: list[str] = field(default_factory=list)


class _KeepingServer(InterceptionServer):
    """The interception server, keeping its rollouts (to read their calls after the episode)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.opened: list[Rollout] = []

    def open_rollout(self, **kw: Any) -> Rollout:
        rollout = super().open_rollout(**kw)
        self.opened.append(rollout)
        return rollout


def run_task(
    agent: Agent,
    task_id: str,
    *,
    nothing: bool = False,
    cache_dir: Path = DEFAULT_CACHE,
    tokenizer: Any = None,
    timeout_s: float = 180.0,
    preinstalled: bool = True,
) -> Run:
    """One episode of `agent` on a terminal task, graded, its calls recorded as training rows.

    `preinstalled`: the sandbox finds the agent in `cache_dir` (read-only); otherwise the spec's
    install runs in the sandbox, reaching only its `install_allow` hosts through the allowlist proxy."""
    tokenizer = tokenizer or policy_tokenizer()
    policy = ScriptedBackend(tokenizer, nothing_script if nothing else reference_script(agent, task_id))
    config = AgentEpisodeConfig(
        agent=_cached(agent.spec, cache_dir) if preinstalled else agent.spec,
        sampling=SamplingParams(max_tokens=1024),
        agent_timeout_s=timeout_s,
        max_model_calls=16,
    )
    server = _KeepingServer(request_timeout_s=120.0)

    async def go() -> AgentEpisodeResult:
        async with AsyncGenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=120) as env:
            return await run_agent_episode(
                env, policy, tokenizer, server=server, task={"task_id": task_id}, rubric=load_grader(TERMINAL_DIR), config=config
            )

    with server:
        result = asyncio.run(go())
    return Run(result, policy, [r.dialect for rollout in server.opened for r in rollout.requests])


@contextmanager
def _answering(
    server: InterceptionServer, answer: Callable[[InterceptedRequest], dict[str, Any] | None], rollout_id: str | None = None
) -> Iterator[tuple[Rollout, list[InterceptedRequest]]]:
    rollout = server.open_rollout(rollout_id=rollout_id)
    seen: list[InterceptedRequest] = []

    def serve() -> None:
        while True:
            try:
                request = rollout.next_request_blocking(timeout_s=300)
            except TimeoutError:
                return
            if request is None:
                return
            seen.append(request)
            reply = answer(request)
            if reply is None:
                rollout.close()  # the trainer ends the rollout: the waiting call gets 410
                return
            request.respond(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield rollout, seen
    finally:
        rollout.close()
        thread.join(10)


def run_refused(
    agent: Agent, *, wrong_key: bool, cache_dir: Path = DEFAULT_CACHE, timeout_s: float = 120.0, rollout_id: str | None = None
) -> tuple[AgentRun, list[InterceptedRequest]]:
    """The agent with a wrong key (`wrong_key`), or with a trainer that closes the rollout at its
    first call: what the agent did, and the calls that reached the trainer. `rollout_id`: the
    rollout's id (default a random one)."""
    spec = _cached(agent.spec, cache_dir)
    with InterceptionServer(request_timeout_s=60.0) as server, _answering(server, lambda r: None, rollout_id) as (rollout, seen):
        with GenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=timeout_s + 120) as env:
            env.reset(task_id=TASKS[0])
            base = rollout.base_url()
            launch = AgentLaunch(
                spec=spec, base_url=base, api_key=SecretStr("sk-not-the-secret" if wrong_key else rollout.secret), timeout_s=timeout_s
            )
            run = AgentRun.model_validate(env.call("run_agent", launch=launch.to_wire()))
    return run, seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", choices=sorted(AGENTS), default="pi")
    parser.add_argument("--task", choices=TASKS, action="append", help="default: all three")
    parser.add_argument("--nothing", action="store_true", help="the policy does nothing (the grade must be 0)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    agent = AGENTS[args.agent]
    install_s = install_agent(agent.spec, cache_dir=args.cache_dir.resolve())
    print(f"install: {install_s:.1f} s")
    tokenizer = policy_tokenizer()
    for task_id in args.task or TASKS:
        run = run_task(agent, task_id, nothing=args.nothing, cache_dir=args.cache_dir.resolve(), tokenizer=tokenizer)
        r = run.result
        print(json.dumps({
            "agent": args.agent, "task": task_id, "reward": r.reward, "model_calls": r.model_calls, "segments": len(r.segments),
            "exit_code": r.agent_run.exit_code if r.agent_run else None, "duration_s": round(r.duration_s, 2),
            "agent_s": round(r.agent_run.duration_s, 2) if r.agent_run else None,
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
