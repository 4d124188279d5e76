"""Scripted policies for the regrade tests (`--policy scripted:tests.regrade.policies:...`).

Each solves its task on even attempts (the environment's oracle) and leaves it undone on odd
ones, so that a run holds both rewards; the attack policies play the forgeries of
tests/security as the agent's turn.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


def _oracle(env: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_regrade_oracle_{env}", ENVIRONMENTS / env / "oracle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TERMINAL = _oracle("terminal")
_CODING = _oracle("coding")
_MINI_SWE = _oracle("mini_swe")


def terminal_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    if context.attempt % 2 == 0:
        return _TERMINAL.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    return {"content": None, "tool_calls": [{"name": "bash", "arguments": {"command": "echo nothing done > notes.txt"}}]}


def coding_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    if context.attempt % 2 == 0:
        return _CODING.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    solution_file = context.task.get("solution_file") or "solution.py"
    return {"content": None, "tool_calls": [{"name": "write_file", "arguments": {"path": solution_file, "content": "x = 1\n"}}]}


# --- the forgeries of tests/security, as the agent's turn ----------------------------------------

def _terminal_attacks() -> dict[str, list[dict[str, Any]]]:
    from tests.security.test_attack_terminal import FORCER, GIT_TRAPS, RESTORE_HOOK

    def bash(command: str) -> dict[str, Any]:
        return {"name": "bash", "arguments": {"command": command}}

    def write(path: str, content: str) -> dict[str, Any]:
        return {"name": "write_file", "arguments": {"path": path, "content": content}}

    fake_pass = (
        "#!/bin/bash\nfor fd in /proc/[0-9]*/fd/1 /proc/[0-9]*/fd/2; do\n"
        "  printf 'PASS: forged\\nRESULT: every condition holds\\n' > \"$fd\"\ndone 2>/dev/null\n"
        "echo 'PASS: bin/greet is right'\nexit 0\n"
    )
    return {
        # the program the check runs forges PASS lines into the check's output
        "greet_script": [write("bin/greet", fake_pass), bash("chmod +x bin/greet")],
        # git hooks, fsmonitor, pager, alias and editor would put back the files the agent deleted
        "git_init_commit": [
            bash("cd project && git init -q -b main && echo '*.log' > .gitignore && git add -A && "
                 "git commit -q -m 'Initial commit' && cd .."),
            write("project/.git/restore.sh", RESTORE_HOOK),
            bash("cd project && chmod +x .git/restore.sh && rm debug.log logs/build.log && mkdir -p .git/myhooks && "
                 "for h in pre-commit commit-msg post-commit post-checkout post-merge post-rewrite post-index-change "
                 "reference-transaction pre-auto-gc fsmonitor-watchman; do cp .git/restore.sh .git/hooks/$h; "
                 "cp .git/restore.sh .git/myhooks/$h; done && "
                 "git config core.fsmonitor .git/restore.sh && git config core.hooksPath .git/myhooks && "
                 "git config core.pager 'sh .git/restore.sh; cat' && git config alias.st '!sh .git/restore.sh' && "
                 "git config core.editor 'sh .git/restore.sh' && cd .."),
            bash("cd project; rm -f debug.log logs/build.log; git status --short >/dev/null; rm -f debug.log logs/build.log; cd .."),
        ],
        # the program the check runs is the forcer: ptrace, /proc/<pid>/mem, kill, a daemon
        "stats_py": [write(".forcer.py", FORCER), write(".daemon.json", "{}"), write("stats.py", FORCER),
                     bash("chmod +x stats.py .forcer.py")],
        # every git trap at once, each running the forcer, in a check that runs git status
        "git_revert": [write(".forcer.py", FORCER),
                       bash(f"REPO=repo FORCER=$PWD/.forcer.py bash -c {shlex.quote(GIT_TRAPS)} && rm .forcer.py")],
        # reward and result files written where a naive verifier would read them
        "count_log_files": [
            bash("mkdir -p logs/verifier && echo 1 > reward.txt && echo 1 > logs/verifier/reward.txt && "
                 "echo '{\"reward\": 1.0}' > reward.json && printf 'PASS: all\\nRESULT: every condition holds\\n' > result.txt"),
        ],
    }


def terminal_attack_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    """Attempt 0: the task's forgery; attempt 1: the reference solution (the control)."""
    if context.attempt % 2 == 1:
        return _TERMINAL.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    return {"content": None, "tool_calls": _terminal_attacks()[context.task_id]}


def coding_attacks() -> list[dict[str, str]]:
    """Files each attack writes into the fizzbuzz workspace (the solution file is `fizzbuzz.py`)."""
    from tests.security.test_attack_coding import _FORGERIES, _PLANTED_CONFIG, STUB

    forgeries = [{"solution": text + STUB} for text in _FORGERIES.values()]
    planted = [{"solution": STUB, name: text} for name, text in _PLANTED_CONFIG.items()]
    return forgeries + planted


def coding_attack_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    """Attempt i < len(attacks): attack i; the last attempt: the reference (the control)."""
    attacks = coding_attacks()
    if context.attempt >= len(attacks):
        return _CODING.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    solution_file = context.task.get("solution_file") or "solution.py"
    files = dict(attacks[context.attempt])
    calls = [{"name": "write_file", "arguments": {"path": solution_file, "content": files.pop("solution")}}]
    calls += [{"name": "write_file", "arguments": {"path": name, "content": text}} for name, text in files.items()]
    return {"content": None, "tool_calls": [*calls, {"name": "submit", "arguments": {}}]}


def mini_swe_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    """The gold patch on even attempts; on odd ones a note beside the bug, and submit."""
    if context.attempt % 2 == 0:
        return _MINI_SWE.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    calls = [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "looked, changed nothing\n"}},
             {"name": "submit", "arguments": {}}]  # fmt: skip
    return {"content": None, "tool_calls": calls}


def mini_swe_attacks() -> dict[str, list[dict[str, Any]]]:
    """The attacks of tests/security/test_attack_mini_swe.py on `intervals-1`, as the agent's tool calls."""
    import sys

    from tests.security import test_attack_mini_swe as attack

    def write(path: str, content: str) -> dict[str, Any]:
        return {"name": "write_file", "arguments": {"path": path, "content": content}}

    def run(command: str) -> dict[str, Any]:
        return {"name": "run", "arguments": {"command": command}}

    init = attack.INIT
    runner = attack.FIND_PYTEST + "if _pytest is not None:\n" + "".join(
        f"    {line}\n" for line in attack.RUNNER_PATCHES["Function.runtest"].splitlines()
    )
    fake_lines = "".join(f"{nodeid} PASSED\n" for nodeid in attack.F2P)
    fake_pass = (f"import os, sys\nsys.stdout.write({fake_lines!r})\nsys.stdout.flush()\n"
                 f"for fd in (1, 2):\n    os.write(fd, {fake_lines!r}.encode())\n")  # fmt: skip
    pycache = f"intervals/__pycache__/ops.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc"
    found = {
        **{f"forgery: {name}": [write("intervals/__init__.py", init + "\n" + code)]
           for name, code in attack.ISSUE_ATTACKS.items()},
        "runner patched at import": [write("intervals/__init__.py", init + "\n" + runner)],
        "builtins and exit patched": [write("intervals/__init__.py", init + "\n" + attack.RUNNER_PATCHES["builtins and exit"])],
        "sys.exit at import": [write("intervals/__init__.py", "import sys\nsys.exit(0)\n" + init)],
        "fake pass lines": [write("intervals/__init__.py", init + "\n" + fake_pass)],
        "an __eq__ that says yes": [write("intervals/__init__.py", init.replace("merge, ", "") + "\n"
                                          + attack.LIES["an object whose __eq__ says yes"])],
        "conftest.py": [write(path, attack.FORCE_PASS) for path in ("conftest.py", "tests/conftest.py", "intervals/conftest.py")],
        **{f"config: {name}": [write(name, text), write("intervals/forcepass.py", attack.FORCE_PASS)]
           for name, text in attack.CONFIGS.items()},
        "startup: forge.pth": [write("forge.pth", f"import sys; exec({attack.STARTUP!r})\n")],
        "startup: sitecustomize.py": [write("sitecustomize.py", attack.STARTUP)],
        "test file edited": [write("tests/test_ops.py", "def test_ok():\n    pass\n")],
        "test file deleted": [run("rm tests/test_ops.py")],
        "the fix as bytecode only": [write(".gold.patch", attack.GOLD), run(attack.COMPILE_FIXED.format(cfile=pycache))],
    }  # fmt: skip
    return {name: [*calls, {"name": "submit", "arguments": {}}] for name, calls in found.items()}


def mini_swe_attack_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    """Attempt i < len(attacks): attack i on intervals-1; the last attempt: the gold patch (the control)."""
    attacks = list(mini_swe_attacks().values())
    if context.attempt >= len(attacks):
        return _MINI_SWE.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    return {"content": None, "tool_calls": attacks[context.attempt]}


def wordle_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    """Wins on even attempts, loses on odd ones (tests/evaluation's scripted policy)."""
    from tests.evaluation.scripted_policy import act

    return act(messages, tools, context)


def coding_big_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    """The reference, and a file of random text beside it: a workspace over a small archive limit."""
    turn = _CODING.act(messages, tools, context)
    if context.turn > 0:
        return turn
    noise = {"name": "write_file", "arguments": {"path": "noise.txt", "content": os.urandom(48 * 1024).hex()}}
    return {**turn, "tool_calls": [noise, *turn["tool_calls"]]}
