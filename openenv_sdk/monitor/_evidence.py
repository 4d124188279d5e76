"""Evidence hooks: did the transcript do what the task needs, so that a reward is believable?

A hook takes the `Episode` and answers True (the work is there), False (a reward without it is
suspect) or None (it cannot tell). The default asks for one successful call that acts (not only
reads or lists); an environment registers a sharper one under its name (`register_evidence`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._transcript import Episode, ToolCall

__all__ = ["EvidenceHook", "default_evidence", "evidence_for", "register_evidence"]

EvidenceHook = Callable[[Episode], bool | None]

_READ_ONLY_TOOL = re.compile(r"^(read|list|ls|view|cat|get|search|find|grep|show|open|look|state|describe|help)(_|$)")
_EVIDENCE: dict[str, EvidenceHook] = {}


def _acted(call: ToolCall) -> bool:
    return not call.is_error and not _READ_ONLY_TOOL.match(call.name.lower())


def default_evidence(episode: Episode) -> bool | None:
    """At least one call that succeeded and is not a read-only tool (read_*, list_*, get_*, ...)."""
    return any(_acted(call) for call in episode.calls)


def register_evidence(env: str, hook: EvidenceHook) -> None:
    """Use `hook` for the environment named `env` (its manifest's `name`)."""
    _EVIDENCE[env] = hook


def evidence_for(env: str) -> EvidenceHook:
    """The hook registered for `env`, else `default_evidence`."""
    return _EVIDENCE.get(env, default_evidence)


# --- the shipped environments -------------------------------------------------------------------


def _wrote(episode: Episode, path: str | None = None) -> bool:
    """A successful write_file (to `path` when given) or a shell/program call that succeeded."""
    for call in episode.calls:
        if call.is_error:
            continue
        written = call.written_path()
        if written is not None and (path is None or written.lstrip("./") == path.lstrip("./")):
            return True
        if call.name in ("bash", "run", "run_shell", "run_python") and "[exit code 0]" in call.output:
            return path is None or path in " ".join(call.texts())
    return False


def _coding(episode: Episode) -> bool | None:
    solution = episode.task.get("solution_file")
    return _wrote(episode, str(solution) if solution else None)


def _mini_swe(episode: Episode) -> bool | None:
    return _wrote(episode)


def _terminal(episode: Episode) -> bool | None:
    return any(call.name == "bash" and not call.is_error for call in episode.calls)


def _wordle(episode: Episode) -> bool | None:
    return any(call.name == "guess" and not call.is_error for call in episode.calls)


register_evidence("coding", _coding)
register_evidence("mini_swe", _mini_swe)
register_evidence("terminal", _terminal)
register_evidence("wordle", _wordle)
