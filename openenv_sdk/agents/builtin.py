"""The built-in agent: a small tool-calling loop over an OpenAI-compatible chat API (stdlib only).

It runs inside an environment's sandbox, in the episode's working directory:

    python -m openenv_sdk.agents.builtin --task-file task.md

It reads the base URL from `OPENAI_BASE_URL`, the key from `OPENAI_API_KEY` and the model from
`OPENENV_MODEL`, sends the task with two tools (`bash`, to run a shell command here, and
`submit`, to finish), runs each tool call the model makes and sends the results back, until the
model answers without a tool call, calls `submit`, or `--max-turns` is reached. Every model call
is a plain `POST {base_url}/chat/completions`, so under interception each is answered by the
trainer's policy. It needs nothing but Python, so it runs in any image.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

SYSTEM_PROMPT = (
    "You are an agent in a Linux sandbox. Solve the task by running shell commands with the `bash` tool, "
    "one at a time, reading their output. When the task is done, call `submit`."
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the task's working directory and return its output and exit status.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command line to run."}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish the task.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

OUTPUT_CHARS = 8000


def chat(base_url: str, key: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One chat completion; raises RuntimeError with the server's message on an HTTP error."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")[:500]
        raise RuntimeError(f"the model API answered {e.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise RuntimeError(f"the model API is unreachable at {base_url}: {e}") from None


def run_bash(command: str, timeout_s: float) -> str:
    try:
        done = subprocess.run(
            ["/bin/bash", "-c", command], check=False, capture_output=True, text=True, timeout=timeout_s, errors="replace"
        )
    except subprocess.TimeoutExpired:
        return f"[timed out after {timeout_s} s]"
    out = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr else "")
    if len(out) > OUTPUT_CHARS:
        out = out[:OUTPUT_CHARS] + f"\n[... {len(out) - OUTPUT_CHARS} characters cut ...]"
    return f"{out.rstrip()}\n[exit code {done.returncode}]".lstrip()


def arguments_of(call: dict[str, Any]) -> dict[str, Any]:
    raw = call.get("function", {}).get("arguments") or {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-file", default=os.environ.get("OPENENV_TASK_FILE"))
    parser.add_argument("--max-turns", type=int, default=int(os.environ.get("OPENENV_AGENT_MAX_TURNS", "10")))
    parser.add_argument("--command-timeout-s", type=float, default=float(os.environ.get("OPENENV_AGENT_COMMAND_TIMEOUT_S", "30")))
    parser.add_argument("--request-timeout-s", type=float, default=float(os.environ.get("OPENENV_AGENT_REQUEST_TIMEOUT_S", "600")))
    parser.add_argument("--max-tokens", type=int, default=int(os.environ.get("OPENENV_AGENT_MAX_TOKENS", "512")))
    args = parser.parse_args(argv)
    base_url, key = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY", "")
    if not base_url or not args.task_file:
        print("needs OPENAI_BASE_URL and a task file (--task-file or OPENENV_TASK_FILE)", file=sys.stderr)
        return 2
    with open(args.task_file, encoding="utf-8") as f:
        task = f.read()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
    model = os.environ.get("OPENENV_MODEL", "policy")
    for turn in range(1, args.max_turns + 1):
        body = {"model": model, "messages": messages, "tools": TOOLS, "max_tokens": args.max_tokens}
        try:
            answer = chat(base_url, key, body, args.request_timeout_s)
        except RuntimeError as e:
            print(f"[turn {turn}] {e}", file=sys.stderr)
            return 3
        message = answer["choices"][0]["message"]
        messages.append({k: v for k, v in message.items() if v is not None})
        calls = message.get("tool_calls") or []
        print(f"[turn {turn}] {len(calls)} tool call(s): {[c.get('function', {}).get('name') for c in calls]}", flush=True)
        if not calls:
            return 0
        for call in calls:
            name = call.get("function", {}).get("name")
            arguments = arguments_of(call)
            if name == "submit":
                print("[submitted]", flush=True)
                return 0
            if name == "bash" and isinstance(arguments.get("command"), str):
                result = run_bash(arguments["command"], args.command_timeout_s)
            else:
                result = f"error: unknown tool {name!r} or bad arguments {arguments!r}; the tools are bash(command) and submit()"
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "name": name, "content": result})
    print(f"[stopped after {args.max_turns} turns]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
