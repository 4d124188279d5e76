"""Write a `Config` (or any mapping of sections) back to INI text."""

from __future__ import annotations

from collections.abc import Mapping


def dumps(config: Mapping[str, Mapping[str, str]]) -> str:
    """INI text for `config`; multi-line values are written as indented continuations."""
    blocks = []
    for section, options in config.items():
        lines = [f"[{section}]"]
        for key, value in options.items():
            first, *rest = str(value).split("\n")
            lines.append(f"{key} = {first}")
            lines.extend(f"    {line}" for line in rest)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")
