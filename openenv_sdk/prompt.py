"""How an observation becomes the policy's prompt: the one rendering for `openenv eval`,
`openenv collect` and every trainer adapter (ART, SkyRL, verifiers), so a policy is trained on
the same text it is evaluated on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["observation_text"]

# Observation fields that are the protocol's, not the task's.
_PROTOCOL_FIELDS = frozenset({"metadata", "done", "reward"})
# Fields read as the task's text, shown first and without a label.
_TEXT_FIELDS = ("prompt", "message", "instructions", "text")


def observation_text(observation: Mapping[str, Any]) -> str:
    """The observation as the user message: its text fields (`prompt`, `message`, `instructions`,
    `text`) first, then every other non-empty field as `name: value` (JSON for a non-string);
    `"Start."` when nothing is left."""
    fields = {k: v for k, v in observation.items() if k not in _PROTOCOL_FIELDS and v not in (None, "", [], {})}
    parts = [fields.pop(k) for k in _TEXT_FIELDS if isinstance(fields.get(k), str)]
    rest = [f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in fields.items()]
    if rest:
        parts.append("\n".join(rest))
    return "\n\n".join(parts) or "Start."
