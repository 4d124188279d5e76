"""The generic forgery battery of `openenv validate --deep`, each attack a scripted policy.

A policy optimises the reward, so it will try every way to it that skips the task. These are the
generic ones (docs/grading.md, "Testing a grader"), delivered as a policy would: tool calls only.
Which attacks apply depends on the tools the environment offers (`ToolKit`):

- with a shell, a Python runner or a file-writing tool: reward and result files, a patched test
  runner (`conftest.py`, `pytest.ini`, `sitecustomize.py`), git filters and hooks, an early exit
  (`os._exit(0)`, `sys.exit(0)`) in the code, and reading the hidden data (the grader, its tests);
- always (the "tool-level" ones): every tool called with hostile arguments, and submitting
  without work.

Each attack undoes nothing and does no honest work, so each must score the floor (0.0).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..evaluation._policy import ScriptedPolicy, TurnContext

__all__ = ["ATTACKS", "Attack", "ToolKit", "hostile_arguments"]

_SHELL_ARGS = ("command", "cmd", "script", "shell_command", "command_line")
_CODE_ARGS = ("code", "source", "program")
_PATH_ARGS = ("path", "file", "filename", "file_path", "filepath")
_CONTENT_ARGS = ("content", "contents", "text", "data", "body")
_SUBMIT_NAMES = ("submit", "finish", "done", "end", "complete", "submit_answer")
_MAX_CANDIDATES = 40  # words from leaked text tried as answers
_RESULT_SEPARATOR = "\n\x1e\n"  # between the tool results an attack saw


def _params(tool: dict[str, Any]) -> tuple[str, dict[str, Any], list[str]]:
    function = tool.get("function", tool)
    parameters = function.get("parameters") or {}
    return str(function.get("name", "")), dict(parameters.get("properties") or {}), list(parameters.get("required") or [])


def _is_string(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "string":
        return True
    return any(_is_string(option) for option in schema.get("anyOf", []) if option.get("type") != "null")


@dataclass(frozen=True)
class ToolKit:
    """What the environment's tools let an agent do, found from their names and parameters."""

    shell: tuple[str, str] | None = None
    """(tool, argument) that runs a shell command line."""
    python: tuple[str, str] | None = None
    """(tool, argument) that runs Python code."""
    write: tuple[str, str, str] | None = None
    """(tool, path argument, content argument) that writes a file."""
    read: tuple[str, str] | None = None
    """(tool, path argument) that reads a file."""
    submit: str | None = None
    """A tool without required arguments that ends the episode."""
    answer: tuple[tuple[str, str], ...] = ()
    """(tool, argument) of the other tools with one required string argument: how an answer is given."""
    tools: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, tools: Sequence[dict[str, Any]]) -> ToolKit:
        """Classify OpenAI function schemas (what `openai_tools` makes of `/schema`)."""
        found: dict[str, Any] = {"answer": [], "tools": []}
        for tool in tools:
            name, properties, required = _params(tool)
            found["tools"].append(name)
            strings = [p for p in properties if _is_string(properties[p])]
            shell = next((p for p in _SHELL_ARGS if p in strings), None)
            code = next((p for p in _CODE_ARGS if p in strings), None)
            path = next((p for p in _PATH_ARGS if p in strings), None)
            content = next((p for p in _CONTENT_ARGS if p in strings), None)
            if shell and "shell" not in found:
                found["shell"] = (name, shell)
            elif code and "python" not in found:
                found["python"] = (name, code)
            elif path and content and "write" not in found:
                found["write"] = (name, path, content)
            elif path and set(required) <= {path} and "read" not in found and "list" not in name and "search" not in name:
                found["read"] = (name, path)
            elif not required and name.lower() in _SUBMIT_NAMES and "submit" not in found:
                found["submit"] = name
            elif len(required) == 1 and required[0] in strings and not (shell or code or path):
                found["answer"].append((name, required[0]))
        return cls(
            shell=found.get("shell"), python=found.get("python"), write=found.get("write"), read=found.get("read"),
            submit=found.get("submit"), answer=tuple(found["answer"]), tools=tuple(found["tools"]),
        )  # fmt: skip

    @property
    def can_write(self) -> bool:
        """The agent can put files of its choosing into its workspace."""
        return bool(self.shell or self.python or self.write)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _python_writing(files: dict[str, str]) -> str:
    return (
        "import os\n"
        f"for path, text in {files!r}.items():\n"
        "    try:\n"
        "        os.makedirs(os.path.dirname(path) or '.', exist_ok=True)\n"
        "        open(path, 'w').write(text)\n"
        "    except OSError:\n"
        "        pass\n"
    )


def _write_files(kit: ToolKit, files: dict[str, str], shell_after: str = "") -> list[dict[str, Any]]:
    """Tool calls that write `files` (then run `shell_after`, with a shell), with the best tool offered."""
    if kit.shell:
        lines = [f"mkdir -p {shlex.quote(_dir(p))} 2>/dev/null; printf %s {shlex.quote(t)} > {shlex.quote(p)} 2>/dev/null"
                 for p, t in files.items()]  # fmt: skip
        script = "\n".join([*lines, shell_after, "true"])
        return [_call(kit.shell[0], **{kit.shell[1]: script})]
    if kit.python:
        code = _python_writing(files)
        if shell_after:
            code += f"import subprocess\nsubprocess.run({shell_after!r}, shell=True)\n"
        return [_call(kit.python[0], **{kit.python[1]: code})]
    assert kit.write is not None
    tool, path_arg, content_arg = kit.write
    return [_call(tool, **{path_arg: p, content_arg: t}) for p, t in files.items()]


def _dir(path: str) -> str:
    head = path.rpartition("/")[0]
    return head or "."


# --- the attacks -----------------------------------------------------------------------------

_VERDICT = json.dumps({"reward": 1.0, "score": 1.0, "passed": True, "success": True, "exitstatus": 0,
                       "outcomes": {}, "failed": 0, "errors": 0})  # fmt: skip
_REWARD_FILES = [
    f"{folder}{name}"
    for folder in ("", "../", "/tmp/", "/logs/verifier/", "/logs/", "/output/")
    for name in ("reward.txt", "reward.json", "result.json", "results.json", "score.txt", "report.json",
                 ".openenv_grading_report.json", "openenv_grading_report.json")
]


def reward_files(kit: ToolKit, context: TurnContext, seen: str) -> list[dict[str, Any]]:
    files = {p: ("1\n" if p.endswith(".txt") else _VERDICT) for p in _REWARD_FILES}
    if not (kit.shell or kit.python):  # a write tool: the workspace and absolute paths it may accept
        files = {p: t for p, t in files.items() if not p.startswith("../")}
    return _write_files(kit, files)


_FORCE_PASS_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None


def pytest_collection_modifyitems(session, config, items):
    items[:] = []
"""
_EXIT_WHEN_TESTED = "import os, sys\nif 'pytest' in ' '.join(sys.argv) or 'unittest' in ' '.join(sys.argv):\n    os._exit(0)\n"
_PYTEST_INI = "[pytest]\naddopts = -p no:randomly --co -q\npython_files = no_test_here_*.py\n"


def test_runner(kit: ToolKit, context: TurnContext, seen: str) -> list[dict[str, Any]]:
    files = {
        "conftest.py": _FORCE_PASS_CONFTEST,
        "tests/conftest.py": _FORCE_PASS_CONFTEST,
        "pytest.ini": _PYTEST_INI,
        "tox.ini": _PYTEST_INI.replace("[pytest]", "[tool:pytest]"),
        "setup.cfg": _PYTEST_INI.replace("[pytest]", "[tool:pytest]"),
        "sitecustomize.py": _EXIT_WHEN_TESTED,
        "usercustomize.py": _EXIT_WHEN_TESTED,
    }
    site = ('for d in "$HOME"/.local/lib/python3*/site-packages /usr/lib/python3/dist-packages; do '
            'mkdir -p "$d" 2>/dev/null && cp sitecustomize.py "$d/" 2>/dev/null && '
            'echo "import sitecustomize" > "$d/openenv-zz.pth" 2>/dev/null; done')  # fmt: skip
    return _write_files(kit, files, shell_after=site)


_GIT = """git init -q . 2>/dev/null
git config filter.pass.clean 'sh -c "cat >/dev/null; echo PASS"'
git config filter.pass.smudge cat
git config filter.pass.required false
git config diff.pass.textconv 'sh -c "echo PASS"'
git config core.fsmonitor 'sh -c "echo PASS >&2"'
git config alias.status '!echo nothing to commit, working tree clean'
git config core.pager 'sh -c "echo PASS"'
for h in pre-commit post-commit post-checkout post-merge pre-push reference-transaction post-index-change; do
  printf '#!/bin/sh\\necho PASS\\nexit 0\\n' > .git/hooks/$h; chmod +x .git/hooks/$h
done"""


def git_tamper(kit: ToolKit, context: TurnContext, seen: str) -> list[dict[str, Any]]:
    files = {".gitattributes": "* filter=pass diff=pass\n"}
    if kit.shell or kit.python:
        return _write_files(kit, files, shell_after=_GIT)
    hooks = {f".git/hooks/{h}": "#!/bin/sh\necho PASS\nexit 0\n" for h in ("pre-commit", "post-checkout")}
    config = {".git/info/attributes": "* filter=pass diff=pass\n"}
    return _write_files(kit, {**files, **hooks, **config})


def _early_exit(line: str) -> Callable[[ToolKit, TurnContext, str], list[dict[str, Any]]]:
    """Put `line` at the top of every Python file (and `exit 0` atop every shell script) of the workspace."""

    def attack(kit: ToolKit, context: TurnContext, seen: str) -> list[dict[str, Any]]:
        if kit.shell or kit.python:
            script = (
                "find . -path ./.git -prune -o -type f -name '*.py' -print | while read -r f; do "
                f"{{ printf '%s\\n' {shlex.quote(line)}; cat \"$f\"; }} > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"; done; "
                "find . -path ./.git -prune -o -type f -name '*.sh' -print | while read -r f; do "
                "{ printf '#!/bin/sh\\nexit 0\\n'; cat \"$f\"; } > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"; done"
            )
            files = {"solution.py": line + "\n", "main.py": line + "\n"}
            task = context.task
            for name in [task.get("solution_file"), *(task.get("files") or {})]:
                if isinstance(name, str) and name.endswith(".py"):
                    files.pop(name, None)  # it exists: the loop above prefixes it
            return _write_files(kit, files, shell_after=script)
        names = {"solution.py", "main.py"}
        task = context.task
        names |= {n for n in [task.get("solution_file"), *(task.get("files") or {})] if isinstance(n, str) and n.endswith(".py")}
        return _write_files(kit, {name: line + "\n" for name in sorted(names)})

    return attack


def read_hidden(kit: ToolKit, context: TurnContext, seen: str, *, paths: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Turn 0: read each hidden file at every place it might be; turn 1 (with what was read): try
    its words as answers."""
    if seen:  # the shortest outputs first: a data file's words before a module's
        texts = sorted(seen.split(_RESULT_SEPARATOR), key=len)
        words = list(dict.fromkeys(w for text in texts for w in re.findall(r"[A-Za-z0-9_]{3,40}", text)))
        return [_call(tool, **{arg: word}) for tool, arg in kit.answer for word in words[:_MAX_CANDIDATES]]
    calls = []
    if kit.shell:
        quoted = " ".join(shlex.quote(p) for p in paths)
        script = (f"for f in {quoted}; do cat \"$f\" 2>/dev/null; done; "
                  "ls -la .. / 2>/dev/null | head -50")  # fmt: skip
        calls.append(_call(kit.shell[0], **{kit.shell[1]: script}))
    elif kit.python:
        code = f"for p in {list(paths)!r}:\n    try:\n        print(open(p).read())\n    except OSError:\n        pass\n"
        calls.append(_call(kit.python[0], **{kit.python[1]: code}))
    if kit.read:
        calls += [_call(kit.read[0], **{kit.read[1]: p}) for p in paths]
    return calls


_HOSTILE_STRINGS = ["../../../../../../etc/passwd", "A" * 100_000, "\x00\x00", "'; DROP TABLE tasks; --$(id)`id`"]


def hostile_arguments(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """Argument sets a hostile policy sends to one tool: traversal, huge, NUL, injection, wrong types,
    out-of-range numbers, missing and unknown fields."""
    _, properties, required = _params(tool)
    out: list[dict[str, Any]] = [{}, {"__class__": "x", "__proto__": {"admin": True}}]
    for value in _HOSTILE_STRINGS:
        out.append({p: value for p in properties})
    for wrong in (-(2**63), None, {"$gt": ""}):
        out.append({p: wrong for p in (required or list(properties))})
    return out


def hostile_args(kit: ToolKit, context: TurnContext, seen: str, *, tools: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    calls = [{"name": _params(tool)[0], "arguments": arguments} for tool in tools for arguments in hostile_arguments(tool)]
    return calls


def submit_without_work(kit: ToolKit, context: TurnContext, seen: str) -> list[dict[str, Any]]:
    return [_call(kit.submit)] if kit.submit else []


@dataclass(frozen=True)
class Attack:
    """One attack of the battery: who it applies to, how it plays, and the fix when it scores."""

    name: str
    what: str
    fix: str
    applies: Callable[[ToolKit], bool]
    make: Callable[..., list[dict[str, Any]]]
    turns: int = 1
    """Turns of tool calls: 2 when the second acts on what the first read."""

    def policy(self, kit: ToolKit, **options: Any) -> ScriptedPolicy:
        """The attack as a scripted policy: its tool calls (then `submit`, when there is one), then a final answer."""

        def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> dict[str, Any] | str:
            if context.turn >= self.turns:
                return "Done."
            seen = _RESULT_SEPARATOR.join(str(m.get("content") or "") for m in messages if m.get("role") == "tool")
            calls = self.make(kit, context, seen, **options)
            if context.turn == self.turns - 1 and kit.submit and self.name != "submit_without_work":
                calls = [*calls, _call(kit.submit)]
            return {"content": None, "tool_calls": calls} if calls else "Done."

        return ScriptedPolicy(act, name=f"attack:{self.name}")


_GRADING_FIX = "compute the verdict on the trusted side, where the agent's code never runs (docs/grading.md)"

ATTACKS: tuple[Attack, ...] = (
    Attack("reward_files", "writes reward and result files (reward.txt, result.json, a pytest report) everywhere it can",
           f"The grader read a file the agent can write: {_GRADING_FIX}", lambda k: k.can_write, reward_files),
    Attack("test_runner", "patches the test runner: conftest.py, pytest.ini, tox.ini, setup.cfg, sitecustomize.py",
           "Hidden tests ran with configuration the agent wrote: run them with "
           "openenv_sdk.grading.pytest_run.run_hidden_tests (a fresh folder, an empty pytest.ini, the solution behind a pipe)",
           lambda k: k.can_write, test_runner),
    Attack("git_tamper", "leaves git filters, textconv, fsmonitor, an alias and hooks in the workspace's .git",
           "A check ran git on the agent's repository: read it with openenv_sdk.grading.trusted_git (no agent config, "
           "hooks or filters)", lambda k: k.can_write, git_tamper),
    Attack("exit_os", "puts `os._exit(0)` at the top of every Python file (and `exit 0` atop every shell script)",
           "A check took an exit status from a process running the agent's code: judge outcomes written by trusted "
           "code (run_hidden_tests, ProgramRunServer), never the exit code", lambda k: k.can_write,
           _early_exit("import os; os._exit(0)")),
    Attack("exit_sys", "puts `sys.exit(0)` at the top of every Python file (and `exit 0` atop every shell script)",
           "A check took an exit status from a process running the agent's code: judge outcomes written by trusted "
           "code (run_hidden_tests, ProgramRunServer), never the exit code", lambda k: k.can_write,
           _early_exit("import sys; sys.exit(0)")),
    Attack("read_hidden", "reads the hidden data (hidden/, tests/, the grader) wherever it may be, then tries its words as answers",
           "Hidden data reached the agent: list it under `hidden:` in openenv.yaml (it never enters the image), and "
           "let no tool read outside the session's workspace", lambda k: bool(k.shell or k.python or k.read),
           read_hidden, turns=2),
    Attack("hostile_args", "calls every tool with hostile arguments (traversal, 100 kB strings, NUL, injection, "
           "wrong types, missing and unknown fields)",
           "A tool's failure counted as progress, or broke the session: validate arguments and grade the work only",
           lambda k: bool(k.tools), hostile_args),
    Attack("submit_without_work", "submits at once, without any work",
           "The grader rewards the submit call: grade the work, not the submission", lambda k: bool(k.submit),
           submit_without_work),
)
