"""A lint for shell verifiers: lines that run the agent's code themselves.

A check (or a Harbor `test.sh`) must run what the agent wrote only through the program-run
server (`run_agent` / `run_program` in the terminal environment, `openenv_sdk.grading.program_runs`):
run directly, the agent's program would share the check's uid and pid namespace. `runs_agent_code`
finds lines that execute a workspace file as a command (`./run.sh`, `/app/bin/tool`,
`"$WORKSPACE/x"`), through an interpreter (`python3 stats.py`, `bash fix.sh`, `. ./env.sh`),
or run `make`; a command after `run_agent`/`run_program N` is an argument, not flagged. It is
a reasonable lint, not a proof (it does not follow variables or functions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["logical_lines", "runs_agent_code"]

_COMMAND_START = (
    r"(?:^|[;&|(`{]|\$\(|\b(?:then|do|else|exec|time|nohup|command|"
    r"timeout(?:\s+-[a-z]+(?:\s+\d\S*)?|\s+--\S+)*\s+\d\S*|env(?:\s+-\S+)*(?:\s+\w+=\S*)*))\s*"
)
_INTERPRETERS = r"(?:bash|sh|dash|zsh|ksh|python[0-9.]*|pytest|perl|ruby|node|php|source|\.)"
_SCRIPT = r"[\"']?[A-Za-z0-9_][\w./-]*\.(?:sh|py|pl|rb|js|php)\b"


def logical_lines(script: str) -> list[str]:
    """The script's lines with backslash continuations joined."""
    lines: list[str] = []
    pending = ""
    for line in script.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def runs_agent_code(
    script: str, workspaces: Iterable[str] = ("$WORKSPACE",), *, runners: Iterable[str] = ()
) -> list[str]:
    """The lines of `script` that execute the agent's files themselves (see the module's doc).

    Args:
        script: the shell script.
        workspaces: how the script names the agent's folder (`/app`, `$WORKSPACE`); relative
            paths (`./x`, `../x`, `x.py`) count as the agent's too.
        runners: regular expressions of the script's own helpers that run the command after
            them (the terminal checks' `check WHAT COMMAND...`: `r"\\bcheck\\s+(?:\"[^\"]*\"|\\S+)"`).
    """
    start = _COMMAND_START
    extra = list(runners)
    if extra:
        start = rf"(?:{_COMMAND_START}|(?:{'|'.join(extra)})\s+)"
    roots = "|".join(re.escape(w.rstrip("/")) + "/" for w in workspaces)
    program = rf"[\"']?(?:{roots}|\$\{{?(?:WORKSPACE|OLDPWD|PWD)\b|\./|\.\./)"
    patterns = [
        re.compile(start + program),
        re.compile(start + _INTERPRETERS + r"(?:\s+-[^\s-]\S*)*\s+(?:" + program + "|" + _SCRIPT + ")"),
        re.compile(start + r"(?:make|npm|cargo|go\s+run)\b"),
    ]
    found = []
    for line in logical_lines(script):
        if line.lstrip().startswith("#"):
            continue
        if any(pattern.search(line) for pattern in patterns):
            found.append(line)
    return found
