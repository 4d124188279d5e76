"""mini-swe-agent (from PyPI) runs one task, its model calls answered by a scripted policy.

The agent is a whole CLI program: it makes its own OpenAI-compatible model calls and runs the
commands it is given itself. It is run exactly as its `AgentSpec`
(`openenv_sdk.agents.known.MINI_SWE_AGENT`) says, in one of two ways:

- by default, as a subprocess of this script (`render_agent_command` fills in the spec; the
  config file goes under a scratch HOME; the run gets the rollout's base URL and secret);
- with `--terminal-env`, by the terminal environment itself: a local `openenv serve` of
  `environments/terminal` receives the launch over the orchestrator's `run_agent` call and runs
  the agent in its sandbox (as its sandbox user, under its memory and process limits).

Either way every model call lands on the trainer's `InterceptionServer`, where a scripted policy
(standing in for the model being trained) answers: first a bash command that creates a file,
then the command that submits. Run it with the trainers' venv:

    .venv-trainers/bin/python examples/agents/mini_swe_agent_intercepted.py
    .venv-trainers/bin/python examples/agents/mini_swe_agent_intercepted.py --text            # text-based protocol
    .venv-trainers/bin/python examples/agents/mini_swe_agent_intercepted.py --terminal-env
    .venv-trainers/bin/python examples/agents/mini_swe_agent_intercepted.py --wrong-secret    # fails fast: 401

The first run installs mini-swe-agent into `.cache/agents/` (about a minute, with the system's
`python3`); later runs, and the sandbox (through `OPENENV_AGENTS_DIR`), reuse it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_trainers.intercept import InterceptedRequest, InterceptionServer, Rollout
from pydantic import SecretStr

from openenv_sdk.agents import AgentLaunch, AgentRun, AgentSpec, render_agent_command
from openenv_sdk.agents.known import MINI_SWE_AGENT, MINI_SWE_AGENT_TEXT
from openenv_sdk.client import GenericEnvClient

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = ROOT / ".cache" / "agents"
TERMINAL_DIR = ROOT / "environments" / "terminal"
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

FILE_NAME = "hello.txt"
FILE_TEXT = "written by mini-swe-agent"
INSTRUCTION = f"Create a file named {FILE_NAME} in the current directory containing the line: {FILE_TEXT}"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

Policy = Callable[[InterceptedRequest], dict[str, Any] | None]
"""Answers one model call with an assistant message; None: the trainer gives up on the rollout."""


@dataclass
class Episode:
    """What one intercepted run did."""

    exit_code: int
    timed_out: bool
    duration_s: float
    requests: list[dict[str, Any]] = field(default_factory=list)
    """A summary of every intercepted model call, in order (see `describe`)."""
    file_text: str | None = None
    """What the agent left in `FILE_NAME` (None: no such file)."""
    output: str = ""
    install_s: float | None = None


def describe(request: InterceptedRequest) -> dict[str, Any]:
    """The shape of one model call: who said what, which tools were offered, how it was asked."""
    return {
        "index": request.index,
        "received_at": request.received_at,
        "model": request.body.model,
        "stream": request.body.stream,
        "roles": [m.get("role") for m in request.messages],
        "tools": [t.get("function", {}).get("name") for t in request.tools or []],
        "last": str(request.messages[-1].get("content") or "")[:160],
        "other_fields": sorted(set(request.body.model_dump(exclude_unset=True)) - {"model", "messages", "tools"}),
    }


def scripted_answer(request: InterceptedRequest, *, text: bool) -> dict[str, Any]:
    """The policy: step 0 writes the file with a bash command, every later step submits."""
    command = f"printf '%s\\n' '{FILE_TEXT}' > {FILE_NAME} && cat {FILE_NAME}" if request.index == 0 else SUBMIT
    if text:
        return {"content": f"THOUGHT: one command.\n\n```mswea_bash_command\n{command}\n```"}
    return {
        "content": "One command.",
        "tool_calls": [{"function": {"name": "bash", "arguments": {"command": command}}}],
    }


def _is_text_based(spec: AgentSpec) -> bool:
    return spec.config is not None and "litellm_textbased" in spec.config


@contextmanager
def _trainer(policy: Policy, wait_s: float) -> Iterator[tuple[Rollout, list[dict[str, Any]]]]:
    """An interception server with one rollout whose calls `policy` answers on a thread; yields
    the rollout and the list the calls' summaries go to (`at_s`: seconds after the block began)."""
    seen: list[dict[str, Any]] = []

    def serve(rollout: Rollout) -> None:
        while True:
            try:
                request = rollout.next_request_blocking(timeout_s=wait_s)
            except TimeoutError:
                return
            if request is None:  # the rollout was closed: the agent is done
                return
            seen.append(describe(request))
            answer = policy(request)
            if answer is None:
                rollout.close()  # the waiting call gets 410
                return
            request.respond(answer, completion_tokens=8)

    with InterceptionServer(request_timeout_s=30.0) as server:
        rollout = server.open_rollout()
        thread = threading.Thread(target=serve, args=(rollout,), daemon=True)
        thread.start()
        started = time.time()
        try:
            yield rollout, seen
        finally:
            rollout.close()  # ends the policy's wait with None
            thread.join(10)
            for request in seen:
                request["at_s"] = round(request.pop("received_at") - started, 2)


def _shell(command: str, *, cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[int, bool, str]:
    """Run a shell command in its own process group; kill the whole group on timeout."""
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout_s)
        return process.returncode, False, out
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        return 124, True, out


def _base_env(home: Path, cache_dir: Path) -> dict[str, str]:
    """What a sandbox gives every command: the system's PATH (its `python3` installs the agent), the
    agent's HOME, and (here) where agents are installed: a cache kept between runs."""
    return {"PATH": SANDBOX_PATH, "HOME": str(home), "LANG": "C.UTF-8", "OPENENV_AGENTS_DIR": str(cache_dir)}


def install_agent(spec: AgentSpec, *, home: Path, cache_dir: Path = DEFAULT_CACHE) -> float:
    """Run the spec's install command (a no-op once it succeeded); the seconds it took."""
    launch = AgentLaunch(spec=spec, base_url="http://127.0.0.1:9/v1", api_key=SecretStr("unused"))
    _, install, _, _ = render_agent_command(launch, workdir=str(home), task_file="/dev/null", python=sys.executable)
    if not install:
        return 0.0
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    code, timed_out, out = _shell(install, cwd=home, env=_base_env(home, cache_dir), timeout_s=spec.install_timeout_s)
    if code != 0:
        raise RuntimeError(f"the install of {spec.name} failed ({code}, timed out: {timed_out}):\n{out[-3000:]}")
    return time.monotonic() - started


def run_episode(
    spec: AgentSpec = MINI_SWE_AGENT,
    *,
    scratch: Path,
    cache_dir: Path = DEFAULT_CACHE,
    policy: Policy | None = None,
    wrong_secret: bool = False,
    timeout_s: float = 120.0,
) -> Episode:
    """One episode with the agent as a subprocess: install (cached), then run against a fresh rollout.

    `policy` answers the agent's model calls (default: `scripted_answer`, in the spec's protocol).
    """
    policy = policy or functools.partial(scripted_answer, text=_is_text_based(spec))
    home, workdir = scratch / "home", scratch / "work"
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    task_file = scratch / "task.txt"
    task_file.write_text(INSTRUCTION + "\n", encoding="utf-8")
    install_s = install_agent(spec, home=home, cache_dir=cache_dir)

    with _trainer(policy, timeout_s) as (rollout, seen):
        secret = rollout.secret
        launch = AgentLaunch(
            spec=spec,
            base_url=rollout.base_url(),
            api_key=SecretStr("not-the-secret" if wrong_secret else secret),
            model="policy",
        )
        run, _, env, config = render_agent_command(
            launch, workdir=str(workdir), task_file=str(task_file), python=sys.executable
        )
        if config is not None and spec.config_path:
            target = home / spec.config_path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(config, encoding="utf-8")
        started = time.monotonic()
        code, timed_out, out = _shell(run, cwd=workdir, env=_base_env(home, cache_dir) | env, timeout_s=timeout_s)
        duration = time.monotonic() - started
    if secret in out:
        raise AssertionError("the rollout's secret appeared in the agent's output")
    created = workdir / FILE_NAME
    text = created.read_text(encoding="utf-8") if created.is_file() else None
    return Episode(code, timed_out, duration, seen, text, out, install_s)


def run_in_terminal_environment(
    spec: AgentSpec = MINI_SWE_AGENT,
    *,
    cache_dir: Path = DEFAULT_CACHE,
    policy: Policy | None = None,
    timeout_s: float = 120.0,
) -> Episode:
    """One episode run by the terminal environment (`run_agent`, an orchestrator call), in its sandbox.

    The agent is installed into `cache_dir` first (here, with this host's package index) and the
    sandbox finds it there through `OPENENV_AGENTS_DIR`.
    """
    policy = policy or functools.partial(scripted_answer, text=_is_text_based(spec))
    with tempfile.TemporaryDirectory(prefix="mswea-install-") as home:
        install_s = install_agent(spec, home=Path(home), cache_dir=cache_dir)
    spec = spec.model_copy(update={"env": {**spec.env, "OPENENV_AGENTS_DIR": str(cache_dir)}})
    client = GenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=spec.install_timeout_s + timeout_s + 60)
    with _trainer(policy, timeout_s) as (rollout, seen), client as env:
        env.reset(task_id="clean_tmp_files")
        launch = AgentLaunch(
            spec=spec,
            base_url=rollout.base_url(),
            api_key=SecretStr(rollout.secret),
            instruction=INSTRUCTION,
            timeout_s=timeout_s,
        )
        run = AgentRun.model_validate(env.call("run_agent", launch=launch.to_wire()))
        read = env.call_tool("read_file", path=FILE_NAME)
        text = None if read.is_error else getattr(read.content[0], "text", None)
    return Episode(
        run.exit_code, run.timed_out, run.duration_s, seen, text, run.stdout_tail + run.stderr_tail, install_s
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text", action="store_true", help="the text-based protocol (no tools; code blocks)")
    parser.add_argument("--terminal-env", action="store_true", help="run it in the terminal environment's sandbox")
    parser.add_argument("--wrong-secret", action="store_true", help="give the agent a wrong key: it must fail fast")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where the agent's venv is cached")
    parser.add_argument("--timeout", type=float, default=120.0, help="the agent's wall-clock limit (s)")
    parser.add_argument("--show-output", action="store_true", help="print the agent's own output")
    args = parser.parse_args(argv)
    if args.terminal_env and args.wrong_secret:
        parser.error("--wrong-secret runs the agent as a subprocess only")

    spec = MINI_SWE_AGENT_TEXT if args.text else MINI_SWE_AGENT
    cache = args.cache_dir.resolve()
    if args.terminal_env:
        episode = run_in_terminal_environment(spec, cache_dir=cache, timeout_s=args.timeout)
    else:
        with tempfile.TemporaryDirectory(prefix="mswea-") as scratch:
            episode = run_episode(
                spec, scratch=Path(scratch), cache_dir=cache, wrong_secret=args.wrong_secret, timeout_s=args.timeout
            )
    print(f"install: {episode.install_s:.1f} s (into {cache})")
    for request in episode.requests:
        print(f"request {request['index']}: {json.dumps(request)}")
    if args.show_output or episode.exit_code != 0:
        print("--- agent output (tail) ---\n" + episode.output[-4000:] + "\n---")
    where = "the terminal environment's sandbox" if args.terminal_env else "a subprocess"
    print(
        f"agent {spec.name} in {where}: exit {episode.exit_code}{' (timed out)' if episode.timed_out else ''} "
        f"in {episode.duration_s:.1f} s; {len(episode.requests)} model calls intercepted; "
        f"{FILE_NAME}: {episode.file_text!r}"
    )
    if args.wrong_secret:
        return 0 if episode.exit_code != 0 and not episode.requests else 1
    return 0 if episode.exit_code == 0 and episode.file_text == FILE_TEXT + "\n" else 1


if __name__ == "__main__":
    sys.exit(main())
